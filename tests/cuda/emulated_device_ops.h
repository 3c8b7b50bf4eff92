/// @file emulated_device_ops.h
/// EmulatedDeviceOps: host memory dressed up as a GPU, for CI tests of the staging logic
/// (chunking, ordering, back-pressure) on machines without one. It is NOT CUDA.
///  - "Device" memory is a memfd mapped twice: the address handed out is PROT_NONE, so any
///    direct CPU or socket access by the transport faults (or fails with EFAULT); copies go
///    through a second, read-write view of the same pages.
///  - copy_async() only queues the copy; it happens when a later query() of an event recorded
///    after it runs, and only on the `lag`-th query, so "not ready yet" is exercised.
///  - reduce() queues lib/coll's CPU kernels on the read-write views the same way (the device
///    collectives' kernels; same bytes as the CUDA kernels, which test_reduce_ops.cc checks
///    against the CPU ones). A table made with `reduce = false` has none, as a GPU build
///    without kernels.
/// Thread-safety: all calls under one mutex (ranks as threads share the table).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "gw_device.h"
#include "reduce_kernels.h"

namespace gw::cuda_test {

class EmulatedDeviceOps final : public DeviceOps {
 public:
  explicit EmulatedDeviceOps(int lag = 2, bool reduce = true) : lag_(lag), can_reduce_(reduce) {}
  ~EmulatedDeviceOps() override {
    for (auto& [p, a] : dev_) unmap(a, p);
  }

  const char* name() const override { return "emulated"; }
  Status available() override { return Status(); }
  std::string describe() override { return "host memory emulating a device (tests only)"; }

  Result<void*> alloc_device(size_t bytes) override {
    std::lock_guard lk(mu_);
    const size_t len = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
    int fd = ::memfd_create("gw-emulated-device", 0);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(len)) != 0)
      return Status(Code::kResourceExhausted, "emulated device: memfd", errno);
    void* dev = ::mmap(nullptr, len, PROT_NONE, MAP_SHARED, fd, 0);
    void* shadow = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (dev == MAP_FAILED || shadow == MAP_FAILED)
      return Status(Code::kResourceExhausted, "emulated device: mmap", errno);
    dev_[static_cast<uint8_t*>(dev)] = Alloc{static_cast<uint8_t*>(shadow), len};
    return dev;
  }
  void free_device(void* p) override {
    std::lock_guard lk(mu_);
    // As cudaFree, which synchronizes the device: queued work runs first.
    for (auto& [st, owned] : streams_) run(st, st->issued);
    run(&default_stream_, default_stream_.issued);
    auto it = dev_.find(static_cast<uint8_t*>(p));
    if (it == dev_.end()) return;
    unmap(it->second, it->first);
    dev_.erase(it);
  }
  Result<void*> alloc_pinned(size_t bytes) override {
    std::lock_guard lk(mu_);
    void* p = std::malloc(std::max<size_t>(bytes, 1));
    if (!p) return Status(Code::kResourceExhausted, "emulated pinned memory");
    pinned_[p] = bytes;
    ++pinned_allocs_;
    return p;
  }
  void free_pinned(void* p) override {
    std::lock_guard lk(mu_);
    pinned_.erase(p);
    std::free(p);
  }
  MemKind pointer_kind(const void* p) override {
    std::lock_guard lk(mu_);
    if (find(p)) return MemKind::kCudaDevice;
    return pinned_.count(const_cast<void*>(p)) ? MemKind::kCudaHost : MemKind::kHost;
  }

  Result<DeviceStream> create_stream() override {
    std::lock_guard lk(mu_);
    auto* s = new Stream();
    streams_[s] = std::unique_ptr<Stream>(s);
    return static_cast<DeviceStream>(s);
  }
  void destroy_stream(DeviceStream s) override {
    std::lock_guard lk(mu_);
    streams_.erase(static_cast<Stream*>(s));
  }
  Result<DeviceEvent> create_event() override {
    std::lock_guard lk(mu_);
    auto* e = new Event();
    events_[e] = std::unique_ptr<Event>(e);
    return static_cast<DeviceEvent>(e);
  }
  void destroy_event(DeviceEvent e) override {
    std::lock_guard lk(mu_);
    events_.erase(static_cast<Event*>(e));
  }
  Status copy_async(void* dst, const void* src, size_t n, DeviceStream s) override {
    std::lock_guard lk(mu_);
    uint8_t* d = resolve(dst, n);
    const uint8_t* from = resolve(const_cast<void*>(src), n);
    if (!d || !from) return Status(Code::kInvalidArgument, "emulated copy outside a buffer");
    Stream* st = stream(s);
    st->q.push_back(Copy{d, from, n, ++st->issued, {}});
    return Status();
  }
  bool can_reduce() const override { return can_reduce_; }
  /// dst = a op b, queued on s like a kernel launch.
  Status reduce(DataType dt, ReduceOp op, void* dst, const void* a, const void* b, size_t count,
                uint32_t div, DeviceStream s) override {
    if (!can_reduce_) return DeviceOps::reduce(dt, op, dst, a, b, count, div, s);
    std::lock_guard lk(mu_);
    const size_t n = count * dtype_size(dt);
    uint8_t* d = resolve(dst, n);
    const uint8_t* x = resolve(const_cast<void*>(a), n);
    const uint8_t* y = resolve(const_cast<void*>(b), n);
    if (!d || !x || !y) return Status(Code::kInvalidArgument, "emulated reduce outside a buffer");
    Stream* st = stream(s);
    st->q.push_back(
        Copy{d, x, n, ++st->issued, [=] { coll::reduce(dt, op, d, x, y, count, div); }});
    ++reductions_;
    return Status();
  }
  int reductions() const { return reductions_; }

  Status record(DeviceEvent e, DeviceStream s) override {
    std::lock_guard lk(mu_);
    auto* ev = static_cast<Event*>(e);
    ev->stream = stream(s);
    ev->upto = ev->stream->issued;
    ev->queries = 0;
    return Status();
  }
  Result<bool> query(DeviceEvent e) override {
    std::lock_guard lk(mu_);
    auto* ev = static_cast<Event*>(e);
    if (!ev->stream || ev->stream->done >= ev->upto) return true;
    if (++ev->queries < lag_) return false;
    run(ev->stream, ev->upto);
    return true;
  }
  Status synchronize(DeviceStream s) override {
    std::lock_guard lk(mu_);
    Stream* st = stream(s);
    run(st, st->issued);
    return Status();
  }
  Result<DmaBuf> export_dmabuf(void*, size_t) override {
    return Status(Code::kNotSupported, "emulated device: no dma-buf");
  }

  /// Test access to device memory (the read-write view).
  uint8_t* shadow(void* dev) {
    std::lock_guard lk(mu_);
    return resolve(dev, 1);
  }
  int pinned_allocs() const { return pinned_allocs_; }

 private:
  struct Alloc {
    uint8_t* shadow = nullptr;
    size_t len = 0;
  };
  struct Copy {
    uint8_t* dst;
    const uint8_t* src;
    size_t n;
    uint64_t id;
    std::function<void()> fn;  // a reduction instead of a copy
  };
  struct Stream {
    std::deque<Copy> q;
    uint64_t issued = 0, done = 0;
  };
  struct Event {
    Stream* stream = nullptr;
    uint64_t upto = 0;
    int queries = 0;
  };

  static void unmap(const Alloc& a, uint8_t* dev = nullptr) {
    ::munmap(a.shadow, a.len);
    if (dev) ::munmap(dev, a.len);
  }
  const std::pair<uint8_t* const, Alloc>* find(const void* p) const {
    auto* q = static_cast<const uint8_t*>(p);
    auto it = dev_.upper_bound(const_cast<uint8_t*>(q));
    if (it == dev_.begin()) return nullptr;
    --it;
    return q < it->first + it->second.len ? &*it : nullptr;
  }
  // Device addresses -> their read-write view; host addresses as they are.
  uint8_t* resolve(void* p, size_t n) {
    auto* q = static_cast<uint8_t*>(p);
    auto* a = find(q);
    if (!a) return q;
    if (q + n > a->first + a->second.len) return nullptr;
    return a->second.shadow + (q - a->first);
  }
  Stream* stream(DeviceStream s) {
    if (s) return static_cast<Stream*>(s);
    return &default_stream_;
  }
  static void run(Stream* st, uint64_t upto) {
    while (!st->q.empty() && st->q.front().id <= upto) {
      const Copy& c = st->q.front();
      if (c.fn)
        c.fn();
      else
        std::memcpy(c.dst, c.src, c.n);
      st->done = c.id;
      st->q.pop_front();
    }
  }

  const int lag_;
  std::mutex mu_;
  std::map<uint8_t*, Alloc> dev_;
  std::map<void*, size_t> pinned_;
  std::map<Stream*, std::unique_ptr<Stream>> streams_;
  std::map<Event*, std::unique_ptr<Event>> events_;
  Stream default_stream_;
  int pinned_allocs_ = 0;
  std::atomic<int> reductions_{0};
  const bool can_reduce_;
};

/// Installs a table for the lifetime of the object, restoring the previous one after.
class ScopedDeviceOps {
 public:
  explicit ScopedDeviceOps(DeviceOps* ops) : prev_(set_device_ops(ops)) {}
  ~ScopedDeviceOps() { set_device_ops(prev_); }

 private:
  DeviceOps* prev_;
};

}  // namespace gw::cuda_test
