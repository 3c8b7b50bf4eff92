/// @file rdma_device.h
/// Verbs resources with RAII owners, and the choice of device, port and GID (by name or
/// automatically: first active port, a RoCE v2 GID with an IPv4 address preferred).
/// Thread-safety: none; setup path only.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "gw_status.h"

namespace gw::drv::rdma {

template <typename T, int (*F)(T*)>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p) F(p);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>>;
using CqPtr = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>>;
using ChannelPtr =
    std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_comp_channel, ibv_destroy_comp_channel>>;
using QpPtr = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp>>;
using MrPtr = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>>;

/// What was asked for: empty/negative fields mean "choose".
struct DeviceWish {
  std::string name;
  int port = 0;
  int gid_index = -1;
};

/// An opened device with the port and GID in use.
struct DeviceChoice {
  ContextPtr ctx;
  std::string name;
  int port = 1;
  int gid_index = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  bool roce = false;
  uint32_t ipv4 = 0;  ///< the GID's IPv4 address (network order), 0 if none
  uint64_t speed_mbps = 0;
  ibv_device_attr attr{};
  ibv_port_attr port_attr{};
  std::string why;  ///< how it was chosen, for the log
};

/// Open the device. @return Unavailable (no device, none active, name not found: lists the
/// devices present), InvalidArgument (port or GID index out of range), SystemError.
Result<DeviceChoice> open_device(const DeviceWish& wish);

/// Registers [p, p+n) of the endpoint's own buffers on `pd` into `out`.
/// @return ResourceExhausted (ENOMEM/EPERM: names `ulimit -l`), SystemError.
Status register_buffer(ibv_pd* pd, void* p, size_t n, int access, const std::string& dev,
                       MrPtr* out);

/// "fe80::...:1" style text of a GID.
std::string gid_to_string(const ibv_gid& g);
/// Bytes of an enum ibv_mtu.
int mtu_bytes(ibv_mtu m);

}  // namespace gw::drv::rdma
