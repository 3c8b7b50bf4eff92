// RdmaTransport: device resources, control listener, connection set-up, progress loop; its
// keys and registration are in rdma_options.cc.
#include "rdma_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "log.h"
#include "rdma_endpoint.h"
#include "rdma_gpu.h"

namespace gw::drv::rdma {
namespace {

constexpr int kPollBatch = 32;

}  // namespace

Result<std::unique_ptr<Transport>> RdmaTransport::open(const Config& cfg) {
  std::unique_ptr<RdmaTransport> t(new RdmaTransport());
  GW_RETURN_IF_ERROR(t->init(cfg));
  return std::unique_ptr<Transport>(std::move(t));
}

Status RdmaTransport::init(const Config& cfg) {
  log_ = log::get("gw.drv.rdma");
  Settings set;
  GW_RETURN_IF_ERROR(read_options(cfg, &set));
  opts_ = set.opts;
  if (opts_.peer_timeout_ns < 3 * opts_.heartbeat_ns) {
    return Status(Code::kInvalidArgument,
                  "rdma.peer_timeout_ms must be at least 3 x rdma.heartbeat_ms (a late heartbeat "
                  "or two must not name a live peer)");
  }
  GW_ASSIGN_OR_RETURN(dev_, open_device(set.wish));
  GW_RETURN_IF_ERROR(init_verbs());
  regcache_ = std::make_unique<RegCache>(pd_.get(), dev_.name, set.reg_cache_entries);
  // Pulls register their bounce buffers through the cache (rdma_pulls.cc): a buffer the
  // store keeps is registered once; one it frees must leave the cache first.
  store().set_free_hook(
      [](void* rc, const uint8_t* p, size_t n) { static_cast<RegCache*>(rc)->invalidate(p, n); },
      regcache_.get());
  GW_RETURN_IF_ERROR(init_listener(set.ctrl_iface));
  GW_RETURN_IF_ERROR(init_epoll());
  uint8_t payload[32];
  size_t n = encode_addr(ctrl_local_, payload);
  GW_ASSIGN_OR_RETURN(addr_, Address::make("rdma", 1, {payload, n}));
  GW_ASSIGN_OR_RETURN(GpuPath gpu, probe_gpu(cfg, pd_.get()));
  gpu_ = gpu;
  if (gpu_.name == "staging") stage_ops_ = *device_ops();  // probed usable above
  init_props(gpu);
  core_.init("rdma", log_, opts_.cq_depth, opts_.max_outstanding, opts_.unexpected_bytes);
  stash_.resize(kPollBatch);
  log_->info("rdma: {} port {} GID[{}] {} ({}), MTU {}, control on {}; GPU memory: {}", dev_.name,
             dev_.port, dev_.gid_index, gid_to_string(dev_.gid), dev_.why, mtu_bytes(dev_.mtu),
             ctrl_local_.to_string(), gpu.why);
  return Status();
}

// Control listener: on the GID's IPv4 address when it has one.
Status RdmaTransport::init_listener(const std::string& iface) {
  if (dev_.ipv4 != 0 && iface.empty()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ctrl_local_.ss);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = dev_.ipv4;
    ctrl_local_.len = sizeof(sockaddr_in);
  } else {
    GW_ASSIGN_OR_RETURN(auto local, choose_local(iface, "", "auto"));
    ctrl_local_ = local.addr;
  }
  GW_RETURN_IF_ERROR(listener_.open(
      "rdma", log_, ctrl_local_, sizeof(Hello), opts_.hello_timeout_ms,
      [](const uint8_t* b) -> const char* {
        Hello h;
        std::memcpy(&h, b, sizeof h);
        return h.magic != kHelloMagic || h.version != kWireVersion
                   ? "not a gradwire rdma hello (wrong magic or version)"
                   : nullptr;
      },
      [this](Fd fd, const uint8_t* b) {
        Hello h;
        std::memcpy(&h, b, sizeof h);
        answer(std::move(fd), h);
      }));
  listener_.key_of([](const uint8_t* b) {
    Hello h;
    std::memcpy(&h, b, sizeof h);
    return h.key;
  });
  return Status();
}

Status RdmaTransport::init_epoll() {
  epfd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epfd_ || !wake_fd_) return Status(Code::kSystemError, "rdma: epoll/eventfd", errno);
  auto watch = [&](int fd, PollItem* item) -> Status {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = item;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return Status(Code::kSystemError, "rdma: epoll_ctl", errno);
    return Status();
  };
  GW_RETURN_IF_ERROR(watch(listener_.fd(), &listen_item_));
  GW_RETURN_IF_ERROR(watch(channel_->fd, &channel_item_));
  return watch(wake_fd_.get(), &wake_item_);
}

void RdmaTransport::init_props(const GpuPath& gpu) {
  props_.name = "rdma";
  props_.device = dev_.name;
  props_.link_speed_mbps = dev_.speed_mbps;
  props_.zero_copy_kinds = {MemKind::kHost, MemKind::kCudaHost};
  if (gpu.zero_copy) props_.zero_copy_kinds.push_back(MemKind::kCudaDevice);
  props_.max_message_size = opts_.max_message;
  props_.one_sided = true;
  props_.requires_registration = false;  // unregistered buffers go through the cache
  props_.max_outstanding = opts_.max_outstanding;
  // The NIC acks; the thread sends heartbeats (a stopped rank is named in
  // rdma.peer_timeout_ms) and answers rendezvous requests and credits while the caller computes
  // (A/B on soft-RoCE: docs/bench-rdma.md).
  props_.progress_thread = true;
  props_.progress_tick_us = 20'000;
}

Status RdmaTransport::init_verbs() {
  pd_.reset(ibv_alloc_pd(dev_.ctx.get()));
  if (!pd_) return Status(Code::kSystemError, "rdma: ibv_alloc_pd on " + dev_.name, errno);
  channel_.reset(ibv_create_comp_channel(dev_.ctx.get()));
  if (!channel_)
    return Status(Code::kSystemError, "rdma: ibv_create_comp_channel on " + dev_.name, errno);
  int fl = ::fcntl(channel_->fd, F_GETFL);
  ::fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK);
  cq_size_ = std::min(dev_.attr.max_cqe, 65536);
  cq_verbs_.reset(ibv_create_cq(dev_.ctx.get(), cq_size_, nullptr, channel_.get(), 0));
  if (!cq_verbs_) {
    return Status(Code::kSystemError,
                  "rdma: ibv_create_cq(" + std::to_string(cq_size_) + ") on " + dev_.name, errno);
  }
  return Status();
}

RdmaTransport::~RdmaTransport() {
  end_background();
  parked_.clear();
  store().set_free_hook(nullptr, nullptr);  // regcache_ goes before the base's store
  if (cq_verbs_ && armed_) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel_.get(), &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  }
}

int RdmaTransport::cq_per_endpoint() const {
  return static_cast<int>(opts_.recv_depth + opts_.sq_depth +
                          (opts_.qps - 1) * (2 * opts_.max_outstanding + opts_.sq_depth));
}

bool RdmaTransport::service_due() {
  const auto now = Clock::now();
  if (now - last_service_ < std::chrono::microseconds(500)) return false;
  last_service_ = now;
  return true;
}

void RdmaTransport::service_events() {
  epoll_event evs[16];
  int n = ::epoll_wait(epfd_.get(), evs, 16, 0);
  for (int i = 0; i < n; ++i) {
    auto* item = static_cast<PollItem*>(evs[i].data.ptr);
    switch (item->kind) {
      case PollItem::kListener:
        listener_.service();
        break;
      case PollItem::kChannel: {
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        while (ibv_get_cq_event(channel_.get(), &cq, &ctx) == 0) {
          ibv_ack_cq_events(cq, 1);
          ++counters_.cq_events;
          armed_ = false;
        }
        break;
      }
      case PollItem::kWake: {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_.get(), &v, sizeof v);
        break;
      }
      case PollItem::kCtrl:
        static_cast<CtrlItem*>(item)->ep->read_ctrl();
        break;
    }
  }
  if (listener_.needs_tick()) listener_.tick();
  liveness();
}

void RdmaTransport::ctrl_closed(RdmaEndpoint* ep) {
  // Deliver what already arrived before reporting the peer gone.
  ibv_wc wc[kPollBatch];
  int k;
  while ((k = ibv_poll_cq(cq_verbs_.get(), kPollBatch, wc)) > 0)
    for (int j = 0; j < k; ++j) handle_wc(wc[j]);
  // RemoteError, as tcp and dpdk report a peer that closed (gw_transport.h).
  ep->fail(Status(Code::kRemoteError, "rdma: " + ep->peer_name() +
                                          " closed its control connection (process "
                                          "exited or endpoint destroyed)"),
           true);
}

void RdmaTransport::handle_wc(const ibv_wc& wc) {
  auto kind = static_cast<WrKind>(wc.wr_id >> 56);
  uint32_t id = static_cast<uint32_t>(wc.wr_id >> 32) & 0xFFFFFF;
  RdmaEndpoint* ep = id < eps_.size() ? eps_[id] : nullptr;
  if (!ep) return;
  if (kind == WrKind::kRecv)  // the common one, without on_wc's dispatch
    ep->on_recv(wc, static_cast<uint32_t>(wc.wr_id));
  else
    ep->on_wc(wc, kind, static_cast<uint32_t>(wc.wr_id));
}

Result<size_t> RdmaTransport::progress(std::span<Completion> out) {
  ibv_wc wc[kPollBatch];
  const int k = ibv_poll_cq(cq_verbs_.get(), kPollBatch, wc);
  if (k < 0) return Status(Code::kSystemError, "rdma: ibv_poll_cq on " + dev_.name, -k);
  // Older completions first; if they all fit, this pass's go straight into `out`.
  core::CompletionSink& sink = core_.sink();
  size_t m = sink.drain(out);
  sink.open_direct(out, m);
  int n = 0;
  if (stash_n_ > 0) {
    for (size_t i = 0; i < stash_n_; ++i) handle_wc(stash_[i]);
    n = static_cast<int>(stash_n_);
    stash_n_ = 0;
  }
  for (int i = 0; i < k; ++i) handle_wc(wc[i]);
  n += k;
  // Idle: the epoll set (control connections, listener) every 32 polls, but in a busy loop
  // at most every 500 us: epoll_wait is a system call that delays the next poll.
  if (n == 0 && (armed_ || listener_.needs_tick() || (++idle_polls_ % 32 == 0 && service_due())))
    service_events();
  else if ((n > 0 && (++busy_polls_ & 1023) == 0) || background() != live_tick_.live()) [[unlikely]]
    liveness();  // heartbeats go on while completions keep coming, and a thread's start/stop
                 // is told at once
  for (RdmaEndpoint* ep : eps_)
    if (ep && (ep->has_tx() || (n == 0 && ep->idle_work()))) ep->flush();
  if (n > 0) busy_ = true;  // a flag, not a clock read: those cost a system call on some hosts
  finish_pass();
  return sink.close_direct(m);
}

void RdmaTransport::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_fd_.get(), &one, sizeof one);
}

int RdmaTransport::arm() {
  // Copies to or from device memory raise no completion event: keep polling (backing off).
  if (staging_busy_ > 0) return -1;
  if (!armed_ && stash_n_ == 0) {
    if (ibv_req_notify_cq(cq_verbs_.get(), 0) == 0) armed_ = true;
    // A completion that came before arming raises no event: take it now and wake the caller.
    int k = ibv_poll_cq(cq_verbs_.get(), kPollBatch, stash_.data());
    if (k > 0) {
      stash_n_ = static_cast<size_t>(k);
      uint64_t one = 1;
      [[maybe_unused]] ssize_t w = ::write(wake_fd_.get(), &one, sizeof one);
    }
  }
  return epfd_.get();
}

void RdmaTransport::endpoint_gone(RdmaEndpoint* ep) {
  if (ep->id() < eps_.size()) eps_[ep->id()] = nullptr;
  cq_used_ -= ep->cq_entries();
  sink().purge(ep);
}

Result<size_t> RdmaTransport::post_recv_any(std::span<const RecvRequest> reqs) {
  auto n = DriverTransport::post_recv_any(reqs);
  for (RdmaEndpoint* ep : eps_) {
    if (!ep || !ep->bound_) continue;
    // Messages left in their receive buffers (back-pressure) may match these now.
    if (ep->held()) ep->retry_held();
    if (ep->take_took()) ep->flush();  // answers to rendezvous requests taken
  }
  return n;
}

Result<MemoryRegion> RdmaTransport::register_memory(void* addr, size_t length, MemKind kind) {
  if (addr == nullptr && length > 0) {
    return Status(Code::kInvalidArgument,
                  "rdma: register_memory(nullptr, " + std::to_string(length) + ") on " + dev_.name);
  }
  // CUDA device memory goes through the GPUDirect path chosen at open (dma-buf or
  // nvidia-peermem). On the staging path nothing is registered: the data path sees the kind
  // and copies through its endpoint's pinned buffers (rdma_staging.cc).
  if (kind == MemKind::kCudaDevice && stage_ops_)
    return MemoryRegion(addr, length, kind, 0, nullptr);
  if (kind == MemKind::kCudaDevice) return make_region(*regcache_, addr, length, kind, &gpu_);
  return make_region(*regcache_, addr, length, kind);
}

std::map<std::string, uint64_t> RdmaTransport::driver_stats() const {
  const auto& c = counters_;
  return {{"bytes_sent", c.bytes_sent},
          {"bytes_received", c.bytes_received},
          {"msgs_sent", c.msgs_sent},
          {"eager_sent", c.eager_sent},
          {"rndv_sent", c.rndv_sent},
          {"zero_copy_sends", c.zero_copy_sends},
          {"inline_sends", c.inline_sends},
          {"protocol_errors", c.protocol_errors},
          {"rejected_conns", listener_.rejected()},
          {"credit_stalls", c.credit_stalls},
          {"credit_writes", c.credit_writes},
          {"cq_events", c.cq_events},
          {"striped_sends", c.striped_sends},
          {"unexpected_pulls", c.unexpected_pulls},
          {"adverts_sent", c.adverts_sent},
          {"adverts_dropped", c.adverts_dropped},
          {"advert_writes", c.advert_writes},
          {"advert_writes_received", c.advert_writes_received},
          {"adverts_received", c.adverts_received},
          {"staged_sends", c.staged_sends},
          {"staged_recvs", c.staged_recvs},
          {"staging_windows", c.staging_windows},
          {"held_stalls", c.held_stalls},
          {"heartbeats_sent", c.heartbeats_sent},
          {"heartbeats_received", c.heartbeats_received},
          {"peer_timeouts", c.peer_timeouts},
          {"reg_cache_hits", regcache_->hits()},
          {"reg_cache_misses", regcache_->misses()},
          {"reg_cache_evictions", regcache_->evictions()},
          {"reg_cache_invalidations", regcache_->invalidations()},
          {"reg_cache_entries", regcache_->size()}};
}

Result<size_t> RdmaTransport::cq_sleep_poll(std::span<Completion> out, int timeout_ms) {
  // Completions since the last sleep: traffic flows, the next one is likely within the spin.
  if (opts_.spin.count() > 0 && take_busy()) {
    const auto end = Clock::now() + opts_.spin;
    do {
      GW_ASSIGN_OR_RETURN(size_t n, progress(out));
      if (n > 0) return n;
    } while (Clock::now() < end);
  }
  return cq_.plain_sleep_poll(out, timeout_ms);
}

}  // namespace gw::drv::rdma
