/// @file rdma_transport.h
/// RDMA verbs transport: one device/port/GID, one protection domain, one completion queue
/// with a completion channel (so blocking waits sleep), one RC queue pair per peer.
/// Connection set-up: the Address names a small TCP control listener; the active side dials
/// it and both sides swap a Hello (rdma_connect.cc); any transport in connect() or poll()
/// answers incoming Hellos, so a Group's dial-all-then-accept order never deadlocks. The
/// control connection stays open: its EOF reports a dead peer, and heartbeats on it name a
/// stopped one (rdma_liveness.cc).
/// Thread-safety: none (one thread drives a transport and its endpoints).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "gw_config.h"
#include "gw_core.h"
#include "gw_device.h"
#include "gw_driver_base.h"
#include "gw_listener.h"
#include "gw_liveness.h"
#include "gw_socket.h"
#include "gw_transport.h"
#include "rdma_counters.h"
#include "rdma_device.h"
#include "rdma_gpu.h"
#include "rdma_options.h"
#include "rdma_regcache.h"
#include "rdma_wire.h"

namespace spdlog {
class logger;
}

namespace gw::drv::rdma {

class RdmaEndpoint;

struct PollItem {  // what an epoll event points at
  enum Kind : uint8_t { kListener, kChannel, kWake, kCtrl } kind;
};
struct CtrlItem : PollItem {  // an endpoint's control connection (EOF: the peer died)
  RdmaEndpoint* ep = nullptr;
};

class RdmaTransport final : public core::DriverTransport<RdmaTransport, RdmaEndpoint> {
 public:
  static Result<std::unique_ptr<Transport>> open(const Config& cfg);
  ~RdmaTransport() override;

  Result<std::unique_ptr<Endpoint>> connect(const ConnectParams& p, Deadline deadline) override;
  Result<MemoryRegion> register_memory(void* addr, size_t length, MemKind kind) override;
  /// The core's; then held messages and taken rendezvous requests move on.
  Result<size_t> post_recv_any(std::span<const RecvRequest> reqs) override;

  // --- DriverTransport's hooks ---
  void wake();  // abort() from another thread: wakes a progress asleep in epoll
  std::map<std::string, uint64_t> driver_stats() const;
  /// Arms the completion channel (the caller is about to sleep) and returns the epoll fd.
  int cq_wait_fd() { return arm(); }
  /// While completions came within the last millisecond, polls up to rdma.spin_us before
  /// sleeping: a completion-channel wake-up costs more than a short poll.
  Result<size_t> cq_sleep_poll(std::span<Completion> out, int timeout_ms);

  // --- used by RdmaEndpoint and the data path ---
  Result<size_t> progress(std::span<Completion> out);
  int arm();
  bool take_busy() { return std::exchange(busy_, false); }  // progress() found work since
  const Options& opts() const { return opts_; }
  /// Completion-queue entries one endpoint may occupy: lane 0's receives and sends, and per
  /// further lane one receive per rendezvous slot plus its sends.
  int cq_per_endpoint() const;
  const DeviceChoice& dev() const { return dev_; }
  ibv_pd* pd() const { return pd_.get(); }
  ibv_cq* verbs_cq() const { return cq_verbs_.get(); }
  RegCache& regcache() { return *regcache_; }
  /// The core's completion sink: a request is accepted only after its completion is reserved
  /// (rdma.cq_depth), so none is ever dropped.
  core::CompletionSink& sink() { return core_.sink(); }
  /// Unexpected eager messages and unexpected rendezvous pulls, within rdma.unexpected_bytes.
  core::UnexpectedStore& store() { return core_.store(); }
  /// Endpoints are listed by id (eps_[id], null once gone).
  void endpoint_gone(RdmaEndpoint* ep);
  void watch_ctrl(RdmaEndpoint* ep, int fd);
  /// `ep`'s control connection reached EOF or failed: the peer is gone.
  void ctrl_closed(RdmaEndpoint* ep);
  /// Whether `buf` (in `mr`, if any) is CUDA memory that must be staged: only on the staging
  /// path, where `mr`'s kind says so, or for an unregistered pointer the device table's.
  bool staged(const void* buf, const MemoryRegion* mr) const {
    if (!stage_ops_) return false;
    if (mr) return mr->kind() == MemKind::kCudaDevice;
    return stage_ops_->pointer_kind(buf) == MemKind::kCudaDevice;
  }
  DeviceOps* stage_ops() const { return stage_ops_; }

 private:
  // State the endpoints and the data path share (friends: the same driver's classes).
  friend class RdmaEndpoint;
  friend class Rendezvous;
  friend class Staging;
  /// Endpoints with copies in flight: blocking waits poll instead of sleeping.
  int staging_busy_ = 0;
  Counters counters_;
  std::shared_ptr<spdlog::logger> log_;

  RdmaTransport() = default;
  // Set-up in steps: options and device, verbs, control listener, epoll set, properties.
  Status init(const Config& cfg);
  Status init_verbs();
  Status init_listener(const std::string& iface);
  Status init_epoll();
  void init_props(const GpuPath& gpu);
  void service_events();
  bool service_due();
  /// Heartbeats and the peer timeout of every endpoint, every ~10 ms (rdma_liveness.cc).
  void liveness();
  /// Passive side: make the QP, connect it, reply, and park it until connect() asks for it.
  void answer(Fd fd, const Hello& h);
  void handle_wc(const ibv_wc& wc);
  Status wait_reply(int fd, Hello* reply, const std::string& who, Deadline deadline);
  /// connect()'s passive side: waits for the endpoint answer() parks under p.key.
  Result<std::unique_ptr<Endpoint>> take_parked(const ConnectParams& p, const std::string& who,
                                                const SockAddr& remote, Deadline deadline);

  Options opts_;
  DeviceChoice dev_;
  SockAddr ctrl_local_;
  PdPtr pd_;
  ChannelPtr channel_;
  CqPtr cq_verbs_;
  int cq_size_ = 0, cq_used_ = 0;
  std::unique_ptr<RegCache> regcache_;
  Fd epfd_, wake_fd_;
  core::HelloListener listener_;
  PollItem listen_item_{PollItem::kListener}, channel_item_{PollItem::kChannel},
      wake_item_{PollItem::kWake};
  bool armed_ = false;
  uint32_t idle_polls_ = 0, busy_polls_ = 0;
  core::LivenessTick live_tick_;
  Clock::time_point last_service_{};  // last idle epoll pass
  bool busy_ = false;                 // progress() found work since take_busy()
  std::vector<ibv_wc> stash_;
  size_t stash_n_ = 0;
  std::map<uint64_t, std::unique_ptr<RdmaEndpoint>> parked_;  // key -> answered, not taken
  GpuPath gpu_;                     // how CUDA device memory is registered
  DeviceOps* stage_ops_ = nullptr;  // set on the staging path: copies device memory
};

}  // namespace gw::drv::rdma
