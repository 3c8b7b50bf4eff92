/// @file store_util.h
/// Internal helpers shared by the Store implementations: error texts that name keys (which are
/// arbitrary bytes), counter values, and a bounded polling loop.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gw_status.h"
#include "gw_time.h"

namespace gw {
class Store;
}

namespace gw::store {

/// Largest key or value any store accepts (the TCP store's wire bound).
inline constexpr size_t kMaxItem = size_t{64} << 20;

/// `t` limited to [0, 30 days], so that now + t cannot overflow (callers pass Nanos::max()).
inline Nanos bounded(Nanos t) {
  constexpr Nanos kMax = std::chrono::hours(24 * 30);
  return t < Nanos(0) ? Nanos(0) : (t > kMax ? kMax : t);
}

/// `bytes` quoted, printable: non-printable bytes as \xNN, cut after 200 characters.
std::string quote(std::string_view bytes);

/// "'a', 'b'" for the first 16 keys, then "and N more".
std::string key_list(std::span<const std::string> keys);

/// Timeout status for a wait/get: names how long and which keys are missing.
Status missing_keys_timeout(std::string_view store, std::span<const std::string> missing,
                            Nanos waited);

/// InvalidArgument when a key or value is larger than kMaxItem.
Status check_sizes(std::string_view store, std::string_view key, std::string_view value);

/// Value of a counter key (decimal text); InvalidArgument when it is not an integer.
Result<int64_t> parse_counter(std::string_view store, std::string_view key, std::string_view value);
/// Counter after adding `delta`; InvalidArgument on overflow.
Result<int64_t> add_checked(std::string_view store, std::string_view key, int64_t value,
                            int64_t delta);

/// Calls `probe` until it returns true, an error, or `timeout` passes; sleeps between calls,
/// starting at 1 ms and doubling up to 50 ms. @return true when probe said so, false on timeout.
Result<bool> poll_until(const std::function<Result<bool>()>& probe, Nanos timeout);

/// The ranks r whose keys[r] is missing now, ascending. One check per rank: error paths only.
Result<std::vector<int>> missing_ranks(Store& store, std::span<const std::string> keys);

/// "1, 3, 7" for the first 32 ranks, then "and N more".
std::string join_ranks(const std::vector<int>& ranks);

}  // namespace gw::store
