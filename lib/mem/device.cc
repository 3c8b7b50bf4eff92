// The device-ops registry and the RAII owners of device resources.
#include <unistd.h>

#include <atomic>

#include "gw_build_config.h"
#include "gw_device.h"

#ifndef GW_SKIPPED_DRIVERS
#define GW_SKIPPED_DRIVERS ""
#endif

namespace gw {
namespace {

// Constant-initialised, so drivers may register from their static initialisers in any order.
std::atomic<DeviceOps*> g_ops{nullptr};

std::string why_no_driver() {
  std::string skipped = GW_SKIPPED_DRIVERS;
  const auto at = skipped.find("cuda (");
  if (at == std::string::npos) return "no GPU driver is compiled into this gradwire";
  const auto end = skipped.find(')', at);
  return "this gradwire was built without CUDA: " +
         skipped.substr(at + 6, end == std::string::npos ? end : end - at - 6);
}

}  // namespace

DeviceOps* set_device_ops(DeviceOps* ops) { return g_ops.exchange(ops); }

Result<DeviceOps*> device_ops() {
  DeviceOps* ops = g_ops.load(std::memory_order_acquire);
  if (!ops) return Status(Code::kNotSupported, "device memory: " + why_no_driver());
  GW_RETURN_IF_ERROR(ops->available());
  return ops;
}

MemKind memory_kind_of(const void* p) {
  // Called for every collective: no Status is built (nor allocated) when there is no device.
  DeviceOps* ops = g_ops.load(std::memory_order_acquire);
  return ops && ops->available().ok() ? ops->pointer_kind(p) : MemKind::kHost;
}

DmaBuf& DmaBuf::operator=(DmaBuf&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    offset_ = o.offset_;
    length_ = o.length_;
  }
  return *this;
}

DmaBuf::~DmaBuf() {
  if (fd_ >= 0) ::close(fd_);
}

Result<StreamHandle> StreamHandle::create() {
  GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
  GW_ASSIGN_OR_RETURN(DeviceStream s, ops->create_stream());
  StreamHandle h;
  h.ops_ = ops;
  h.s_ = s;
  return h;
}

StreamHandle& StreamHandle::operator=(StreamHandle&& o) noexcept {
  if (this != &o) {
    if (s_) ops_->destroy_stream(s_);
    ops_ = o.ops_;
    s_ = std::exchange(o.s_, nullptr);
  }
  return *this;
}

StreamHandle::~StreamHandle() {
  if (s_) ops_->destroy_stream(s_);
}

}  // namespace gw
