// The TCP store client's reply parsing (tcp_store_replies.h). Nothing is allocated from a
// length before it was checked: the header against kMaxFrame, strings by wire::Reader.
#include "tcp_store_replies.h"

#include <vector>

#include "tcp_store_proto.h"

namespace gw::store {

Result<size_t> Replies::header(const char* op, std::string_view header) const {
  if (header.size() != wire::kHeader) return bad_reply(op);
  auto magic = wire::get_le(header.data(), 4);
  auto len = wire::get_le(header.data() + 4, 4);
  if (magic != wire::kMagic || len > wire::kMaxFrame) return bad_reply(op);
  return static_cast<size_t>(len);
}

Status Replies::ok(const char* op, std::string_view reply) const {
  wire::Reader r(reply);
  if (static_cast<wire::Reply>(r.u8()) == wire::Reply::kOk && r.ok() && r.at_end()) return Status();
  return bad_reply(op);
}

Result<std::string> Replies::get(std::string_view key, Nanos timeout,
                                 std::string_view reply) const {
  wire::Reader r(reply);
  auto st = static_cast<wire::Reply>(r.u8());
  if (st == wire::Reply::kTimeout || st == wire::Reply::kLeft) {
    std::string k(key);
    if (st == wire::Reply::kTimeout) return missing_keys_timeout(name_, {&k, 1}, timeout);
    uint32_t rank = r.u32();
    uint32_t n = r.u32();
    r.str();
    if (r.ok() && r.at_end() && n == 1) return rank_left("get", rank, {&k, 1});
    return bad_reply("get");
  }
  auto value = r.str();
  if (st != wire::Reply::kOk || !r.ok() || !r.at_end()) return bad_reply("get");
  return std::string(value);
}

Result<int64_t> Replies::add(std::string_view reply) const {
  wire::Reader r(reply);
  auto st = static_cast<wire::Reply>(r.u8());
  if (st == wire::Reply::kError) {
    auto msg = r.str();
    if (r.ok()) return Status(Code::kInvalidArgument, std::string(msg));
  }
  int64_t v = r.i64();
  if (st != wire::Reply::kOk || !r.ok() || !r.at_end()) return bad_reply("add");
  return v;
}

Status Replies::wait(size_t asked, Nanos timeout, std::string_view reply) const {
  wire::Reader r(reply);
  auto st = static_cast<wire::Reply>(r.u8());
  if (st == wire::Reply::kOk && r.at_end()) return Status();
  if (st == wire::Reply::kTimeout || st == wire::Reply::kLeft) {
    uint32_t rank = st == wire::Reply::kLeft ? r.u32() : 0;
    uint32_t n = r.u32();
    // No more missing keys than were asked for: a count of empty names in a large reply would
    // otherwise make millions of strings.
    if (n > asked) return bad_reply("wait");
    std::vector<std::string> missing;
    for (uint32_t i = 0; i < n && r.ok(); ++i) missing.emplace_back(r.str());
    if (r.ok() && r.at_end()) {
      return st == wire::Reply::kLeft ? rank_left("wait", rank, missing)
                                      : missing_keys_timeout(name_, missing, timeout);
    }
  }
  return bad_reply("wait");
}

Result<bool> Replies::check(std::string_view reply) const {
  wire::Reader r(reply);
  auto st = static_cast<wire::Reply>(r.u8());
  uint8_t all = r.u8();
  if (st != wire::Reply::kOk || !r.ok() || !r.at_end()) return bad_reply("check");
  return all != 0;
}

Status Replies::rank_left(const char* op, uint32_t rank,
                          std::span<const std::string> missing) const {
  if (rank > wire::kMaxRank) return bad_reply(op);
  std::string r = "rank " + std::to_string(rank);
  return Status(Code::kRemoteError,
                name_ + ": " + r + " left the job (its store session closed without a " +
                    "goodbye: killed or crashed?) while this rank waited for " + key_list(missing) +
                    "; see " + r + "'s log and exit status, then restart the job")
      .with_rank(static_cast<int>(rank));
}

Status Replies::bad_reply(const char* op) const {
  return Status(Code::kProtocolError,
                name_ + ": malformed reply to " + op + " (is that port a gradwire store server?)");
}

}  // namespace gw::store
