// Registration cache.
#include "rdma_regcache.h"

#include "rdma_gpu.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace gw::drv::rdma {
namespace {

std::string describe(const void* addr, size_t len) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%p, %zu bytes", addr, len);
  return buf;
}

}  // namespace

RegCache::~RegCache() {
  for (auto& [b, e] : by_begin_) ibv_dereg_mr(e->mr);
  for (auto& e : dying_) ibv_dereg_mr(e->mr);
}

Result<RegCache::Entry*> RegCache::acquire(const void* addr, size_t len, const GpuPath* cuda) {
  auto a = reinterpret_cast<uintptr_t>(addr);
  if (addr == nullptr || len == 0 || a + len < a) {
    return Status(Code::kInvalidArgument, "rdma: cannot register (" + describe(addr, len) +
                                              ") on " + dev_ +
                                              ": null pointer, zero length or a range that wraps");
  }
  // Any valid entry starting at or below addr may cover the range (entries can overlap).
  for (auto it = by_begin_.upper_bound(a); it != by_begin_.begin();) {
    --it;
    Entry* e = it->second.get();
    if (e->end >= a + len) {
      ++hits_;
      if (e->refs++ == 0) lru_.erase(e->lru);
      return e;
    }
  }
  ++misses_;
  evict_idle();
  uintptr_t b = 0, end = 0;
  GW_ASSIGN_OR_RETURN(ibv_mr * mr, register_range(addr, len, cuda, &b, &end));
  return insert(b, end, mr);
}

// Registers the pages around [addr, addr+len) (CUDA memory: exactly the range) as [*b, *end).
Result<ibv_mr*> RegCache::register_range(const void* addr, size_t len, const GpuPath* cuda,
                                         uintptr_t* b_out, uintptr_t* end_out) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t b = a & ~(page - 1), end = (a + len + page - 1) & ~(page - 1);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = nullptr;
  if (cuda) {  // device memory: exactly the range, through the GPUDirect path
    GW_ASSIGN_OR_RETURN(mr, register_cuda(pd_, *cuda, const_cast<void*>(addr), len, access, dev_));
    b = a;
    end = a + len;
  } else {
    mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(b), end - b, access);
  }
  if (!mr) {
    int err = errno;
    std::string what = "rdma: ibv_reg_mr(" + describe(addr, len) + ") on " + dev_ + " failed";
    if (err == ENOMEM || err == EPERM || err == EAGAIN) {
      return Status(Code::kResourceExhausted,
                    what +
                        ": cannot pin the memory (raise the locked-memory limit: `ulimit -l "
                        "unlimited`, or memlock in /etc/security/limits.conf / the "
                        "container's --ulimit memlock=-1)",
                    err);
    }
    if (err == EFAULT || err == EINVAL) {
      return Status(Code::kInvalidArgument,
                    what + ": the range is not mapped memory of this process", err);
    }
    return Status(Code::kSystemError, what, err);
  }
  *b_out = b;
  *end_out = end;
  return mr;
}

// A referenced entry for `mr`, registered as [b, end).
RegCache::Entry* RegCache::insert(uintptr_t b, uintptr_t end, ibv_mr* mr) {
  auto owned = std::make_unique<Entry>();
  Entry* e = owned.get();
  e->begin = b;
  e->end = end;
  e->mr = mr;
  e->refs = 1;
  e->lru = lru_.end();
  // Two registrations may start at the same page; keep the older one findable in dying_.
  auto [it, fresh] = by_begin_.try_emplace(b, nullptr);
  if (!fresh) {
    Entry* old = it->second.get();
    if (old->refs == 0) {
      lru_.erase(old->lru);
      ibv_dereg_mr(old->mr);
    } else {
      old->valid = false;
      dying_.push_back(std::move(it->second));
    }
  }
  it->second = std::move(owned);
  return e;
}

void RegCache::release(Entry* e) {
  if (--e->refs > 0) return;
  if (!e->valid) {
    remove(e);
    return;
  }
  e->lru = lru_.insert(lru_.end(), e);
}

void RegCache::invalidate(const void* addr, size_t len) {
  auto a = reinterpret_cast<uintptr_t>(addr);
  for (auto it = by_begin_.begin(); it != by_begin_.end() && it->first < a + len;) {
    Entry* e = it->second.get();
    if (e->end <= a) {
      ++it;
      continue;
    }
    ++invalidations_;
    e->valid = false;
    if (e->refs == 0) {
      lru_.erase(e->lru);
      ibv_dereg_mr(e->mr);
    } else {
      dying_.push_back(std::move(it->second));
    }
    it = by_begin_.erase(it);
  }
}

void RegCache::remove(Entry* e) {
  ibv_dereg_mr(e->mr);
  dying_.remove_if([e](const std::unique_ptr<Entry>& d) { return d.get() == e; });
}

void RegCache::evict_idle() {
  while (by_begin_.size() >= max_entries_ && !lru_.empty()) {
    Entry* e = lru_.front();
    lru_.pop_front();
    ibv_dereg_mr(e->mr);
    by_begin_.erase(e->begin);
    ++evictions_;
  }
}

}  // namespace gw::drv::rdma
