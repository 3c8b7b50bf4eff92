/// @file ps_wire.h
/// The parameter server's wire format (tags, control messages, the key table) and the pure
/// checks a server makes of what a worker sends (fuzz_ps_table, fuzz_ps_msgs_core).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gw_ps.h"
#include "gw_transport.h"

namespace gw::ps {

// ---- wire ------------------------------------------------------------------------------
// Tags: 0x50 ('P') in the top byte keeps them apart from other users of the Group (coll uses
// 0xC0); then a kind byte; then 48 bits of kind-specific fields.
inline constexpr uint64_t kTagPs = 0x50ull << 56;
enum class TagKind : uint64_t { kCtrl = 0, kTable = 1, kPush = 2, kPull = 3 };
inline constexpr uint64_t tag(TagKind k, uint64_t low48 = 0) {
  return kTagPs | (static_cast<uint64_t>(k) << 48) | (low48 & ((1ull << 48) - 1));
}
inline constexpr uint64_t push_tag(uint32_t part) { return tag(TagKind::kPush, part); }
/// A pull's reply is tagged with the request (slot, generation) so replies never cross.
inline constexpr uint64_t pull_tag(uint32_t part, uint32_t slot, uint32_t gen) {
  return tag(TagKind::kPull, (static_cast<uint64_t>(gen & 0xFFF) << 36) |
                                 (static_cast<uint64_t>(slot & 0xFFF) << 24) | part);
}
inline constexpr uint32_t kMaxRequests = 4096;  // 12 bits of the pull tag

/// kFailed: a rank found a peer failed (dead, or stopped: its heartbeats ceased) and tells
/// everyone before it leaves, so that no one blames it for leaving (pad = culprit rank + 1).
/// kLost (on_loss continue): a server dropped worker pad - 1; its BYE is not to be awaited.
enum class MsgType : uint8_t { kHelloOk = 1, kError, kPull, kBye, kFailed, kLost };
inline constexpr uint32_t kMagic = 0x47575053;  // "GWPS"

/// Control message (fixed size, sent whole).
struct CtrlMsg {
  uint32_t magic = kMagic;
  uint8_t type = 0;
  uint8_t code = 0;  // kError: a gw::Code
  uint16_t text_len = 0;
  uint32_t part = 0;    // kPull, kError (of a pull)
  uint32_t slot = ~0u;  // kPull, kError: the request; ~0 = not about a request
  uint32_t gen = 0;
  uint32_t pad = 0;
  uint64_t clock = 0;  // kPull: the worker's clock on the key
  uint64_t bytes = 0;  // kPull: bytes expected; kBye: pushes sent to this server
  char text[216] = {};
  void set_text(std::string_view s) {
    text_len = static_cast<uint16_t>(std::min(s.size(), sizeof text));
    std::memcpy(text, s.data(), text_len);
  }
  std::string_view text_view() const { return {text, std::min<size_t>(text_len, sizeof text)}; }
};
static_assert(sizeof(CtrlMsg) == 256);

/// First message of every worker to every server: options, then the key table.
struct TableHeader {
  uint32_t magic = kMagic;
  uint8_t mode = 0;
  uint8_t on_loss = static_cast<uint8_t>(PsOnLoss::kContinue);  // settled
  uint8_t pad[2] = {};
  int32_t servers = 0, staleness = 0;
  uint64_t min_part = 0, nkeys = 0;
};

// wr_id = kind << 56 | index.
enum class WrKind : uint64_t {
  kCtrlRecv = 1,
  kCtrlSend,
  kTable,
  kPush,
  kPull,
  kStage,
  kData,
  kDataErr
};
inline constexpr uint64_t wr(WrKind k, uint64_t idx) {
  return (static_cast<uint64_t>(k) << 56) | idx;
}
inline WrKind wr_kind(uint64_t w) { return static_cast<WrKind>(w >> 56); }
inline uint64_t wr_index(uint64_t w) { return w & ((1ull << 56) - 1); }

/// Settled options (config keys resolved).
struct Settings {
  PsOptions o;
  uint64_t min_part = 0;  // elements
};
Result<Settings> settle(const Group& g, const PsOptions& opts);
/// Checks a worker's key table (a TableHeader, then nkeys KeySpecs: `len` bytes at `p`) against
/// the server's settings and layout: same options, every declared key once with its count.
/// @return empty if it matches, else why not (the server says who refused whose table).
std::string check_table(const Settings& s, const PsLayout& layout, const uint8_t* p, size_t len);

/// "server rank 0" / "worker rank 3": ranks below `servers` serve.
std::string who(int servers, int rank);
/// "key 7 elements [0, 100)": part `part` of `layout`.
std::string key_desc(const PsLayout& layout, uint32_t part);
/// Whether a control receive of `len` bytes holding `m` is one of ours (sent whole, magic).
inline bool ctrl_ok(const CtrlMsg& m, size_t len) {
  return len == sizeof(CtrlMsg) && m.magic == kMagic;
}
// A server's checks of what a worker sends once the tables matched (PsServer's data path;
// pure, for fuzz_ps_msgs_core). `local`: global part id -> index of the part on this server,
// -1 where another server holds it. @return empty if the server may act on it, else why not
// (the server puts its own name and ": " in front).
/// A pull (ctrl_ok, type kPull) from `rank`: from a worker, of a part held here, for exactly
/// the part's bytes, at a clock that fits the server's signed clocks.
std::string check_pull(const Settings& s, const PsLayout& layout, std::span<const int32_t> local,
                       int rank, const CtrlMsg& m);
/// A push of part `part` (held here) from `rank`, completed with `code` and `len` bytes: from
/// a worker, whole (the transport says InvalidArgument for one longer than the part).
std::string check_push(const Settings& s, const PsLayout& layout, uint32_t part, int rank,
                       Code code, size_t len);

}  // namespace gw::ps
