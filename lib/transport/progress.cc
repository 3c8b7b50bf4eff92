// Background progress: the gate between the application's calls and the progress thread, and
// the thread itself (it drives a transport only while no call is inside it).
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <system_error>
#include <thread>

#include "gw_config.h"
#include "gw_transport.h"
#include "log.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(progress,
               {"transport.progress", ConfigType::kString, "auto",
                "who serves peers while the application computes outside gradwire: "
                "thread (a progress thread per transport, asleep between events), "
                "caller (only the application's calls; a rank that computes longer "
                "than the driver's peer timeout looks dead), auto (the driver's choice: thread on "
                "dpdk, tcp and rdma)"});

// Gates this thread holds (nested scopes are free); a thread rarely drives more than two
// transports at once.
constexpr int kMaxHeld = 8;
thread_local const ProgressGate* t_held[kMaxHeld];
thread_local int t_nheld = 0;

bool held_here(const ProgressGate* g) {
  for (int i = 0; i < t_nheld; ++i)
    if (t_held[i] == g) return true;
  return false;
}

Result<ProgressMode> progress_mode() {
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  GW_ASSIGN_OR_RETURN(std::string v, cfg.get_string("transport.progress"));
  if (v == "auto") return ProgressMode::kAuto;
  if (v == "thread") return ProgressMode::kThread;
  if (v == "caller") return ProgressMode::kCaller;
  return Status(Code::kInvalidArgument,
                "transport.progress = '" + v + "': expected auto, thread or caller");
}

}  // namespace

bool ProgressGate::enter() {
  if (held_here(this)) return false;
  for (uint32_t spins = 0;; ++spins) {
    uint8_t f = kFree;
    if (state_.compare_exchange_weak(f, kApp, std::memory_order_acquire)) break;
    // A background pass takes microseconds; another application thread may take longer.
    if (spins >= 64) sched_yield();
  }
  entries_.store(entries_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (t_nheld < kMaxHeld) t_held[t_nheld++] = this;
  return true;
}

void ProgressGate::exit() {
  for (int i = t_nheld - 1; i >= 0; --i) {
    if (t_held[i] == this) {
      t_held[i] = t_held[--t_nheld];
      break;
    }
  }
  state_.store(kFree, std::memory_order_release);
}

/// One per transport while some layer asked for it: a pass whenever the transport's fd has
/// news or the tick passes, and only while no call is inside the transport. A pass is the
/// driver's poll with no room for completions: they stay queued for the application.
class ProgressThread {
 public:
  ProgressThread(Transport& t, Nanos tick) : t_(t), tick_(tick) {}
  ~ProgressThread() {
    stop_.store(true, std::memory_order_relaxed);
    uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    if (th_.joinable()) th_.join();
    if (stop_fd_ >= 0) ::close(stop_fd_);
  }
  Status start() {
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd_ < 0)
      return Status(Code::kSystemError, "transport progress thread: eventfd failed", errno);
    try {
      th_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      return Status(Code::kSystemError,
                    std::string("transport progress thread could not start: ") + e.what());
    }
    return Status();
  }
  uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }

 private:
  void run() {
    pthread_setname_np(pthread_self(), "gw-progress");  // as NCCL names its proxy threads
    // Readiness the driver leaves pending (data waiting for a receive: back-pressure; events
    // a direct poll did not collect) would wake this loop at once: after each such wake-up
    // the next pass waits longer, doubling up to the tick, until a sleep really sleeps.
    constexpr Nanos kMinGap(200'000);
    Nanos gap = kMinGap;
    const int tick_ms = static_cast<int>(std::max<int64_t>(1, tick_.count() / 1'000'000));
    ProgressGate& g = t_.gate();
    int held = 0;  // wake-ups in a row that found the application calling in
    uint32_t seen = g.entries();
    while (!stop_.load(std::memory_order_relaxed)) {
      int fd = -1;
      int wait_ms = tick_ms;
      // Calls entered since the last look: the application drives (its calls make progress),
      // so stay out of its way; serve the peers once it has stayed out for a whole wait.
      const uint32_t e = g.entries();
      const bool calling = e != seen;
      seen = e;
      if (!calling && g.try_background()) {
        held = 0;
        Completion none[1];
        (void)t_.cq().poll(std::span<Completion>(none, 0));  // errors are the caller's to see
        fd = t_.cq().wait_fd();  // armed under the gate (rdma: its channel; tcp: its epoll set)
        g.end_background();
        passes_.fetch_add(1, std::memory_order_relaxed);
      } else {
        // The application drives: only the timer, backing off up to 16 ms, since each
        // wake-up takes a CPU from busy-polling ranks (memif allreduce 4 KiB 0.89x with a
        // 1 ms tick on 2 cores; PS 4 KiB 0.90x with passes between its calls).
        held = std::min(held + 1, 4);
        wait_ms = std::max(tick_ms, std::min(tick_ms << held, 16));
      }
      pollfd p[2] = {{stop_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
      const auto t0 = Clock::now();
      const int n = ::poll(p, fd >= 0 ? 2 : 1, wait_ms);
      if (n > 0 && fd >= 0 && (p[1].revents & POLLIN) && Clock::now() - t0 < kMinGap) {
        std::this_thread::sleep_for(gap);
        gap = std::min(gap * 2, tick_);
      } else {
        gap = kMinGap;
      }
    }
  }

  Transport& t_;
  Nanos tick_;
  std::thread th_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> passes_{0};
  int stop_fd_ = -1;
};

Transport::Transport() = default;
Transport::~Transport() { end_background(); }

Status Transport::start_background() {
  GW_ASSIGN_OR_RETURN(ProgressMode mode, progress_mode());
  const bool want = mode == ProgressMode::kThread ||
                    (mode == ProgressMode::kAuto && properties().progress_thread);
  if (!want) return Status();
  if (bg_users_++ > 0) return Status();
  auto th =
      std::make_unique<ProgressThread>(*this, Nanos(int64_t{properties().progress_tick_us} * 1000));
  if (Status st = th->start(); !st.ok()) {
    --bg_users_;
    return st;
  }
  bg_ = std::move(th);
  bg_on_.store(true, std::memory_order_relaxed);
  log::get("gw.transport")
      ->debug("transport {}: progress thread started (tick {} us)", properties().name,
              properties().progress_tick_us);
  return Status();
}

void Transport::stop_background() {
  if (bg_users_ == 0 || --bg_users_ > 0) return;
  end_background();
  // Tell the driver at once that nobody serves its peers now (tcp: heartbeats stop saying so).
  DriveScope d(gate_);
  Completion none[1];
  (void)cq().poll(std::span<Completion>(none, 0));
}

void Transport::end_background() {
  if (!bg_) return;
  bg_passes_done_ += bg_->passes();
  bg_.reset();  // joins
  bg_on_.store(false, std::memory_order_relaxed);
  bg_users_ = 0;
}

uint64_t Transport::background_passes() const {
  return bg_passes_done_ + (bg_ ? bg_->passes() : 0);
}

}  // namespace gw
