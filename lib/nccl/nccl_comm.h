/// @file nccl_comm.h
/// The plugin's per-connection records (nccl_plugin.h): a registration (Mr), a request, the
/// Link to one peer and the send/receive Comms that ride on it, with the sizes that bound them.
/// Thread-safety: guarded by their Device's mu (nccl_plugin.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gw_transport.h"
#include "nccl_abi.h"

namespace gw::nccl {

inline constexpr int kMaxRecvs = 8;  ///< grouped receives per irecv (maxRecvs)
inline constexpr int kBurst = 64;    ///< completions taken per CQ poll
inline constexpr int kHeld = 64;     ///< sends a Link holds for its next post_send burst
/// Sends this big are posted at once, not held (between the sizes measured: holding won at
/// 64 and 256 KiB, lost at 1 MiB).
inline constexpr size_t kHoldMax = 512 << 10;

struct Device;

/// A registration (mhandle). Shared by identical regMr calls (refs), since regIsGlobal lets
/// NCCL register one buffer for many comms.
struct Mr {
  Device* dev = nullptr;
  MemoryRegion region;
  int refs = 0;
};

struct Comm;

/// One isend, or one irecv of up to kMaxRecvs buffers. wr_id = address | part index.
struct alignas(16) Request {
  Comm* comm = nullptr;
  bool used = false;
  bool send = false;
  bool abandoned = false;  ///< failed to NCCL while parts were in flight: freed by progress
  uint8_t n = 0;           ///< parts
  uint8_t posted = 0;      ///< parts handed to the transport (the rest wait for room)
  uint8_t left = 0;        ///< parts not yet completed
  Code code = Code::kOk;
  size_t sizes[kMaxRecvs] = {};
  RecvRequest parts[kMaxRecvs];  ///< kept for parts not yet posted
};

inline Request* request_of(uint64_t wr_id) {
  return reinterpret_cast<Request*>(wr_id & ~uint64_t{15});
}

/// The one Endpoint between this process's transport and one peer's. Every comm between the
/// two processes rides on it (NCCL's comms are one-directional; separate endpoints would double
/// the connections each busy poll visits), told apart by the comm id in the upper tag bits.
struct Link {
  std::unique_ptr<Endpoint> ep;
  /// isend holds its send here and the next progress() posts the Link's held sends as one
  /// burst: NCCL posts one send at a time, and one post_send per send cost tcp a sendmsg per
  /// 64 KiB message (0.62x gw-perf's bandwidth, which posts bursts).
  std::array<SendRequest, kHeld> held;
  uint32_t nheld = 0;
  bool listed = false;  ///< in Device::holding
};

/// A send or receive comm: a Link, its comm id, its request pool.
struct Comm {
  Device* dev = nullptr;
  std::shared_ptr<Link> link;
  uint64_t tag_hi = 0;  ///< comm id << 32; NCCL's tag fills the low 32 bits
  bool send = false;
  bool closed = false;  ///< closeSend/closeRecv called; freed when nothing is in flight
  bool warned = false;  ///< the endpoint's error was logged once
  int in_flight = 0;
  std::array<Request, GW_NCCL_MAX_REQUESTS> reqs;
  std::string peer;  ///< for messages
};

}  // namespace gw::nccl
