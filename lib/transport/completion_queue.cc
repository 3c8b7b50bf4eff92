// Blocking wait: spin briefly, then (oversubscribed) yield the CPU, then sleep on the driver's
// fd (or back off where it has none), so a waiting rank on a 2-core machine does not starve
// its peer.
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "gw_config.h"
#include "gw_transport.h"

namespace gw {

namespace {

// Ranks on this host, from the launcher (gradwire's, torchrun, Open MPI, MPICH, Slurm); 0 if
// none says.
int local_ranks() {
  for (const char* v : {"GW_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                        "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return 0;
}

// Spinning only pays when every rank has a CPU of its own; oversubscribed, a spinning rank
// takes the CPU from the peer it waits for (Open MPI yields when oversubscribed for the
// same reason).
bool oversubscribed() {
  cpu_set_t set;
  const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  return local_ranks() > cpus;
}

Nanos auto_spin() { return oversubscribed() ? Nanos(0) : Nanos(20'000); }

// transport.yield_us. Oversubscribed, the peer a rank waits for is often runnable on the same
// CPU: sched_yield hands it the CPU at once, where a sleep on the fd waits for a wake-up
// (allreduce 4 KiB, 4 ranks on 2 cores: 99-103 us sleeping, 64-86 us yielding 500 us first;
// Open MPI also yields when oversubscribed). With nothing else runnable it only spins.
Nanos yield_time() {
  static const Nanos y = [] {
    auto c = Config::global();
    auto v = c.ok() ? c->get_int("transport.yield_us") : Result<int64_t>(-2);
    const int64_t us = v.ok() ? *v : -2;
    if (us == -2) return oversubscribed() ? Nanos(500'000) : Nanos(0);
    return Nanos(std::max<int64_t>(us, 0) * 1000);
  }();
  return y;
}

}  // namespace

Result<size_t> CompletionQueue::wait(std::span<Completion> out, Nanos timeout) {
  static const Nanos spin = [] {
    auto c = Config::global();
    auto v = c.ok() ? c->get_int("transport.spin_us") : Result<int64_t>(-2);
    const int64_t us = v.ok() ? *v : -2;  // checked: no exception may leave the library
    if (us == -2) return auto_spin();
    return us < 0 ? Nanos::max() : Nanos(us * 1000);
  }();
  return wait(out, timeout, spin);
}

Result<size_t> CompletionQueue::wait(std::span<Completion> out, Nanos timeout, Nanos spin) {
  // Poll once before reading the clock: a clock read is a system call on some hosts (HPET).
  GW_ASSIGN_OR_RETURN(size_t first, poll(out));
  if (first > 0) return first;
  const auto start = Clock::now();
  const auto end = timeout == Nanos::max() ? Clock::time_point::max() : start + timeout;
  const auto spin_end = spin >= timeout ? end : start + spin;
  const auto yield_end =
      spin_end >= end ? end : spin_end + std::min<Nanos>(yield_time(), end - spin_end);
  Nanos backoff(1000);
  bool slept = false;
  bool spinning = spin_end > start;
  for (uint32_t polls = 1;; ++polls) {
    size_t n = 0;
    if (!slept) {
      GW_ASSIGN_OR_RETURN(n, poll(out));
    }
    slept = false;
    if (n > 0) return n;
    if (spinning && polls % 8 != 0) continue;  // the clock every 8 polls while spinning
    auto now = Clock::now();
    if (now >= end) {
      return Status(Code::kTimeout,
                    "no completion within " +
                        std::to_string(std::chrono::duration_cast<Millis>(timeout).count()) +
                        " ms");
    }
    if (now < spin_end) continue;
    spinning = false;
    if (now < yield_end) {
      sched_yield();
      continue;
    }
    auto left = std::chrono::duration_cast<Nanos>(end - now);
    int fd = wait_fd();
    if (fd >= 0) {
      // Sleep at most 10 ms at a time: progress that needs a timer (retransmits,
      // heartbeats) must still run.
      int ms = static_cast<int>(std::min<int64_t>(10, (left.count() + 999'999) / 1'000'000));
      GW_ASSIGN_OR_RETURN(size_t k, sleep_poll(out, ms));
      if (k > 0) return k;
      slept = true;  // sleep_poll already polled
    } else {
      std::this_thread::sleep_for(std::min(backoff, left));
      backoff = std::min(backoff * 2, Nanos(1'000'000));
    }
  }
}

Result<size_t> CompletionQueue::sleep_poll(std::span<Completion> out, int timeout_ms) {
  pollfd p{wait_fd(), POLLIN, 0};
  ::poll(&p, 1, timeout_ms);
  return poll(out);
}

}  // namespace gw
