/// @file ps_impl.h
/// Internals shared by the parameter server's roles: wire format (tags, control messages),
/// and PsPeer, which owns what both roles need: any-source control receives, a pool of
/// registered control-message send buffers, the finish (BYE) handshake and failure handling.
/// Thread-safety: as PsWorker/PsServer (one thread at a time).
#pragma once

#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gw_ps.h"
#include "gw_transport.h"

namespace spdlog {
class logger;
}

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

/// Page-aligned registered float/byte buffer.
class RegMem {
 public:
  Status alloc(Transport& t, size_t bytes, const char* what);
  uint8_t* data() const { return mem_.get(); }
  float* floats() const { return reinterpret_cast<float*>(mem_.get()); }
  const MemoryRegion* mr() const { return &mr_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem_;
  MemoryRegion mr_;
};

// ---- PsPeer ------------------------------------------------------------------------------
class PsPeer {
 public:
  PsPeer(Group& g, Settings s, PsLayout layout, const char* role);
  virtual ~PsPeer() = default;

  bool is_server(int rank) const { return rank < s_.o.servers; }
  /// "server rank 0" / "worker rank 3".
  std::string who(int rank) const;
  std::string key_desc(uint32_t part) const;  // "key 7 elements [0, 100)"

 public:  // internal class: the roles and their public wrappers use these
  /// Allocate the control pools and post the control receives.
  Status init_peer();
  /// Completions: the backlog first, then the CQ (sleeping up to `timeout`). 0 on timeout.
  Result<size_t> next(std::span<Completion> out, Nanos timeout);
  /// Post one request, making room by polling (completions go to the backlog) until the
  /// ps timeout. @return the endpoint's error, Timeout.
  Status send(int peer, const SendRequest& r);
  Status recv(int peer, const RecvRequest& r);
  Status recv_any(const RecvRequest& r);
  /// Send a control message from the pool.
  Status send_ctrl(int peer, const CtrlMsg& m);
  /// `culprit`: the rank the error is about (kError pad = rank + 1), -1 for none.
  Status send_error(int peer, Code code, std::string_view text, uint32_t slot = ~0u,
                    uint32_t gen = 0, uint32_t part = 0, int culprit = -1);
  /// Handle completions that belong to the peer layer. @return true if `c` was one.
  /// Control receives are handed to on_ctrl() and reposted.
  bool handle_common(const Completion& c);
  virtual void on_ctrl(int peer, const CtrlMsg& m, size_t len) = 0;
  /// Handle any completion of this role (calls handle_common first).
  virtual void dispatch(const Completion& c) = 0;
  /// A peer's endpoint failed: a RemoteError unless it said BYE first, or the role goes on
  /// without it (on_peer_lost).
  void on_endpoint_error(const Completion& c);
  /// on_loss continue: the role takes the loss of `peer` (not finished). @return false to
  /// fail as with on_loss fail.
  virtual bool on_peer_lost(int peer, const Status& why) = 0;
  bool continuing() const { return s_.o.on_loss == PsOnLoss::kContinue; }
  /// Send BYE to every other rank and wait for those sends. `pushes_to(peer)` goes in the
  /// message. With `await_peers`, also wait for every other rank's BYE (the closing barrier
  /// of finish() and serve()): after it nothing more is in flight to this rank, so it can be
  /// torn down without polling again, and no peer waits for its acknowledgement.
  /// @return Timeout, the sticky error (a peer failed while awaited), or OK (peers already
  /// gone are fine when not awaited).
  Status say_bye(const std::function<uint64_t(int)>& pushes_to, Nanos timeout, bool await_peers);
  /// Record the first fatal error (sticky).
  void fail(Status st);
  /// The transport's progress thread serves this rank's peers between calls (a worker that
  /// computes between push and pull is not taken for dead; a stopped one is named by the
  /// heartbeat timeout). Stopped by the role's destructor, before its buffers go.
  Status start_background();
  void stop_background();
  /// Every public call holds the transport (gw_progress.h).
  DriveScope drive() { return DriveScope(t_.gate()); }

  Group& g_;
  Transport& t_;
  Settings s_;
  PsLayout layout_;
  std::shared_ptr<spdlog::logger> log_;
  std::string me_;  // "ps worker rank 3"
  Status error_;
  std::vector<uint8_t> bye_;   // per rank: said BYE
  std::vector<uint8_t> lost_;  // per rank: lost and gone on without (not awaited)
  std::vector<uint64_t> bye_pushes_;
  std::deque<Completion> backlog_;
  bool background_ = false;

 private:
  Status post_retry(const std::function<Result<size_t>()>& post, const char* what, int peer);
  Status repost_ctrl(uint64_t idx);
  static constexpr uint32_t kCtrlRecvs = 64;
  static constexpr uint32_t kCtrlSends = 1024;
  RegMem ctrl_rx_, ctrl_tx_;
  std::vector<uint32_t> free_tx_;
};

}  // namespace gw::ps
