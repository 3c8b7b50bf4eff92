/// @file ps_impl.h
/// Internals shared by the parameter server's roles (wire format: ps_wire.h): RegMem, and
/// PsPeer, which owns what both roles need: any-source control receives, a pool of
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
#include "ps_wire.h"

namespace spdlog {
class logger;
}

namespace gw::ps {

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
