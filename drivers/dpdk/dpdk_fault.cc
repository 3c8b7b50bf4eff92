// Fault injection: drop, duplicate, reorder, corrupt.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_fault.h"

#include <rte_mbuf.h>

namespace gw::drv::dpdk {

void FaultInjector::init(const FaultProbs& p, uint64_t seed) {
  p_ = p;
  active_ = p.any();
  s_ = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

uint64_t FaultInjector::next() {
  s_ ^= s_ >> 12;
  s_ ^= s_ << 25;
  s_ ^= s_ >> 27;
  return s_ * 0x2545F4914F6CDD1DULL;
}

namespace {
bool has_extbuf(const rte_mbuf* m) {
  for (; m; m = m->next)
    if (RTE_MBUF_HAS_EXTBUF(m)) return true;
  return false;
}
}  // namespace

uint16_t FaultInjector::apply(rte_mbuf** in, uint16_t n, rte_mbuf** out, rte_mempool* pool) {
  uint16_t k = 0;
  rte_mbuf* late = held_old_ ? held_ : nullptr;  // held over from an earlier call
  if (late) held_ = nullptr;
  held_old_ = held_ != nullptr;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = in[i];
    if (hit(p_.drop)) {
      ++c_.dropped;
      rte_pktmbuf_free(m);
      continue;
    }
    if (hit(p_.corrupt) && m->data_len > 0) {
      // Only the first segment: later ones may be the caller's memory (external buffers).
      auto* b = rte_pktmbuf_mtod(m, uint8_t*);
      b[next() % m->data_len] ^= static_cast<uint8_t>(1 + next() % 255);
      ++c_.corrupted;
    }
    if (hit(p_.dup)) {
      if (rte_mbuf* c = rte_pktmbuf_copy(m, pool, 0, UINT32_MAX)) {
        out[k++] = c;
        ++c_.duplicated;
      }
    }
    if (!held_ && hit(p_.reorder)) {
      // A held frame may leave after its send completed and the caller freed the memory of a
      // zero-copy payload (a 32 KiB read of a freed buffer crashed a lossy memif test): it
      // holds a private copy of such a frame, or none if the pool has no room.
      if (has_extbuf(m)) {
        rte_mbuf* c = rte_pktmbuf_copy(m, pool, 0, UINT32_MAX);
        if (!c) {
          out[k++] = m;
          continue;
        }
        rte_pktmbuf_free(m);
        m = c;
      }
      held_ = m;
      held_old_ = false;
      ++c_.reordered;
      continue;
    }
    out[k++] = m;
    if (held_ && held_old_) {  // release behind the packet that overtook it
      out[k++] = held_;
      held_ = nullptr;
    }
    held_old_ = held_ != nullptr;
  }
  if (late) out[k++] = late;
  return k;
}

rte_mbuf* FaultInjector::take_held() {
  if (!held_ || !held_old_) {
    held_old_ = held_ != nullptr;
    return nullptr;
  }
  rte_mbuf* m = held_;
  held_ = nullptr;
  held_old_ = false;
  return m;
}

void FaultInjector::release() {
  rte_pktmbuf_free(held_);
  held_ = nullptr;
}

}  // namespace gw::drv::dpdk
