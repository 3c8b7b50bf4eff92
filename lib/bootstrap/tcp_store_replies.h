/// @file tcp_store_replies.h
/// The TCP store client's reading of a server's replies without its sockets (internal): the
/// frame header and each request's reply payload (tcp_store_proto.h) to the caller's result.
/// The client (tcp_store_client.cc) sends, receives and hands the bytes here;
/// fuzz_store_client_core feeds bytes straight in. Thread-safety: const, any number of threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gw_status.h"
#include "gw_time.h"

namespace gw::store {

class Replies {
 public:
  /// `name` starts every error text ("tcp store HOST:PORT").
  explicit Replies(std::string name) : name_(std::move(name)) {}

  /// A reply frame's header (wire::kHeader bytes). @return its payload length (≤ kMaxFrame).
  Result<size_t> header(const char* op, std::string_view header) const;
  /// A reply that must be a bare OK (SET, HELLO).
  Status ok(const char* op, std::string_view reply) const;
  /// GET of `key` with `timeout`: the value, or Timeout / the rank that left.
  Result<std::string> get(std::string_view key, Nanos timeout, std::string_view reply) const;
  /// ADD: the counter's value, or the server's InvalidArgument text.
  Result<int64_t> add(std::string_view reply) const;
  /// WAIT for `asked` keys with `timeout`: OK, or Timeout / the rank that left, naming the
  /// missing keys (at most `asked`; more is a malformed reply).
  Status wait(size_t asked, Nanos timeout, std::string_view reply) const;
  /// CHECK: whether all keys are present.
  Result<bool> check(std::string_view reply) const;

  /// ProtocolError for a reply to `op` that is not the protocol's.
  Status bad_reply(const char* op) const;

 private:
  // The server's LEFT answer to `op`: rank `rank`'s session closed without a goodbye.
  Status rank_left(const char* op, uint32_t rank, std::span<const std::string> missing) const;

  std::string name_;
};

}  // namespace gw::store
