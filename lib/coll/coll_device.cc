// The device reducer's state (the device table's kernels), and a copy helper.
#include "coll_device.h"

namespace gw::coll {

Status device_reduce_status() {
  GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
  if (ops->can_reduce()) return Status();
  return Status(Code::kNotSupported, std::string("coll: the device table (") + ops->name() +
                                         ") has no reduction kernels (drivers/cuda not built?)");
}

bool is_device_buffer(const void* p) { return memory_kind_of(p) == MemKind::kCudaDevice; }

Status copy_sync(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return Status();
  GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
  GW_RETURN_IF_ERROR(ops->copy_async(dst, src, n, nullptr));
  return ops->synchronize(nullptr);
}

}  // namespace gw::coll
