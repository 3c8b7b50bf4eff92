// Registry of the device reducer (filled by drivers/cuda at load time).
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

Status device_unsupported(const char* what) {
  return Status(Code::kNotSupported,
                std::string("coll: ") + what +
                    " of CUDA device buffers is not supported yet (allreduce with the result on "
                    "the device is); copy to host or pinned memory first");
}

}  // namespace gw::coll
