// Registry of the device reducer (filled by drivers/cuda at load time), and a copy helper.
#include "coll_device.h"

#include <atomic>

namespace gw::coll {
namespace {
std::atomic<DeviceReduceFn> g_reduce{nullptr};
}  // namespace

DeviceReduceFn set_device_reduce(DeviceReduceFn fn) { return g_reduce.exchange(fn); }

DeviceReduceFn device_reduce() { return g_reduce.load(std::memory_order_acquire); }

Status device_reduce_status() {
  if (device_reduce()) return Status();
  return Status(Code::kNotSupported,
                "coll: no device reduction kernels in this gradwire (drivers/cuda not built)");
}

bool is_device_buffer(const void* p) { return memory_kind_of(p) == MemKind::kCudaDevice; }

Status copy_sync(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return Status();
  GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
  GW_RETURN_IF_ERROR(ops->copy_async(dst, src, n, nullptr));
  return ops->synchronize(nullptr);
}

}  // namespace gw::coll
