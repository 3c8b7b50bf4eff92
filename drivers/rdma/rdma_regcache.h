/// @file rdma_regcache.h
/// Registration cache: memory registrations keyed by address range, shared by every
/// MemoryRegion (and internal use) that falls inside one, bounded in entries, least recently
/// used idle entries evicted first. A caller's deregistration (its MemoryRegion dying)
/// invalidates every entry overlapping that range, so freed memory is never reused through a
/// stale registration.
/// Thread-safety: none (owned by one RdmaTransport).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "gw_status.h"
#include "gw_transport.h"

namespace gw::drv::rdma {

struct GpuPath;

class RegCache {
 public:
  struct Entry {
    uintptr_t begin = 0, end = 0;
    ibv_mr* mr = nullptr;
    int refs = 0;       // live MemoryRegions / in-flight requests using it
    bool valid = true;  // false once invalidated: deregistered when refs reach 0
    std::list<Entry*>::iterator lru;
  };

  RegCache(ibv_pd* pd, std::string dev, size_t max_entries)
      : pd_(pd), dev_(std::move(dev)), max_entries_(max_entries) {}
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  /// A referenced entry covering [addr, addr+len). Misses register the range (page-aligned);
  /// with `cuda`, the range is CUDA device memory registered through that GPUDirect path.
  /// @return InvalidArgument (null/zero-length/wrapping range), ResourceExhausted (ibv_reg_mr
  ///         failed with ENOMEM/EPERM: names `ulimit -l`), NotSupported (CUDA memory without
  ///         a GPUDirect path), SystemError.
  Result<Entry*> acquire(const void* addr, size_t len, const GpuPath* cuda = nullptr);
  /// Drops a reference; an invalidated entry is deregistered when its last one goes.
  void release(Entry* e);
  /// Invalidates every entry overlapping [addr, addr+len).
  void invalidate(const void* addr, size_t len);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }
  uint64_t invalidations() const { return invalidations_; }
  size_t size() const { return by_begin_.size(); }

 private:
  Result<ibv_mr*> register_range(const void* addr, size_t len, const GpuPath* cuda, uintptr_t* b,
                                 uintptr_t* end);
  Entry* insert(uintptr_t b, uintptr_t end, ibv_mr* mr);
  void remove(Entry* e);
  void evict_idle();

  ibv_pd* pd_;
  std::string dev_;
  size_t max_entries_;
  std::map<uintptr_t, std::unique_ptr<Entry>> by_begin_;  // valid entries only
  std::list<Entry*> lru_;                                 // idle valid entries, oldest first
  std::list<std::unique_ptr<Entry>> dying_;               // invalidated, still referenced
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0, invalidations_ = 0;
};

/// A MemoryRegion sharing a cache entry; its death invalidates the range in the cache.
/// `cuda`: the GPUDirect path for MemKind::kCudaDevice memory (see RegCache::acquire).
Result<MemoryRegion> make_region(RegCache& cache, void* addr, size_t len, MemKind kind,
                                 const GpuPath* cuda = nullptr);
/// The cache entry behind a region made by make_region; null for none (or length 0).
RegCache::Entry* region_entry(const MemoryRegion* mr);

}  // namespace gw::drv::rdma
