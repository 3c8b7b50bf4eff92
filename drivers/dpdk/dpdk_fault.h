/// @file dpdk_fault.h
/// Fault injection on the receive and transmit paths: each packet is independently dropped,
/// duplicated, held back behind later packets (reordered) or has one byte of its first segment
/// flipped (corrupted), with configured probabilities. For tests and loss benchmarks.
/// Thread-safety: none (owned by one transport).
#pragma once

#include <cstdint>

struct rte_mbuf;
struct rte_mempool;

namespace gw::drv::dpdk {

struct FaultProbs {
  double drop = 0, dup = 0, reorder = 0, corrupt = 0;
  bool any() const { return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0; }
};

struct FaultCounters {
  uint64_t dropped = 0, duplicated = 0, reordered = 0, corrupted = 0;
  FaultCounters& operator+=(const FaultCounters& o) {
    dropped += o.dropped;
    duplicated += o.duplicated;
    reordered += o.reordered;
    corrupted += o.corrupted;
    return *this;
  }
};

class FaultInjector {
 public:
  void init(const FaultProbs& p, uint64_t seed);
  bool active() const { return active_; }
  /// Applies faults to in[0..n) and writes the survivors (and copies) to out, which holds
  /// `cap` >= 2n + 1 pointers. Copies come from `pool`. @return the number written.
  uint16_t apply(rte_mbuf** in, uint16_t n, rte_mbuf** out, rte_mempool* pool);
  /// A packet held back for reordering for longer than one call, or null.
  rte_mbuf* take_held();
  void release();  ///< frees a held packet (teardown)
  const FaultCounters& counters() const { return c_; }

 private:
  uint64_t next();
  bool hit(double p) { return p > 0 && static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }

  FaultProbs p_;
  bool active_ = false;
  uint64_t s_ = 1;
  rte_mbuf* held_ = nullptr;
  bool held_old_ = false;
  FaultCounters c_;
};

}  // namespace gw::drv::dpdk
