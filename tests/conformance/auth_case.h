/// @file auth_case.h
/// What the authentication tests of every driver share (issue 24): a pair connected from two
/// threads, the key cases, transports opened with a key, the refusal both sides must report.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "conformance.h"

namespace gw::conformance {

/// Connects `a` (dialling) and `b` (accepting, in a thread of its own: an active connect
/// waits for the peer's answer to its authentication). @return {a's endpoint, b's}.
std::pair<Result<std::unique_ptr<Endpoint>>, Result<std::unique_ptr<Endpoint>>> connect_pair(
    Transport& a, Transport& b, uint64_t key, Deadline dl);
/// Authentication tests (every driver): the key of the dialling side `a` and of the accepting
/// side `b` (null: none) in each case.
struct KeyCase {
  const char* name;
  const char* a_key;
  const char* b_key;
  bool right() const;  ///< the same key, or none on both sides: they must connect
};
const std::vector<KeyCase>& key_cases();
/// Opens `c` with GW_AUTH_KEY = key (null: unset) as the process key; null on failure.
std::unique_ptr<Transport> open_with_key(const TransportCase& c, const char* key);
/// Both sides of a refused connection say so, and what to do.
void expect_auth_refused(const Status& dialler, const Status& acceptor);

}  // namespace gw::conformance
