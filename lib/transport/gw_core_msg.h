/// @file gw_core_msg.h
/// The transport core's records of receives and messages (gw_core.h), and the hooks a driver
/// gives it: what a driver reads and writes around EndpointCore::begin / finish.
#pragma once

#include <cstdint>

#include "gw_completion_sink.h"
#include "gw_unexpected_store.h"

namespace gw::core {

/// Where an arrived message's bytes go.
enum class Dest : uint8_t { kUser, kUnexpected, kDrain };

inline constexpr uint32_t kNoCookie = UINT32_MAX;

/// A posted receive waiting for its message.
struct Posted {
  RecvRequest req;
  uint64_t post_seq = 0;
  uint32_t cookie = kNoCookie;  // the driver's (rdma: the slot it is advertised in)
};

/// A message being received, or buffered until a receive takes it.
struct InMsg {
  bool active = false;
  bool complete = false;   // every byte is in
  bool claimed = false;    // unexpected, and a receive took it
  bool claim_err = false;  // ... whose buffer was too small (reported already)
  Dest dest = Dest::kUser;
  uint64_t seq = 0, tag = 0, len = 0, arrival = 0;
  uint64_t charged = 0;         // bytes of the unexpected budget it holds
  uint32_t cookie = kNoCookie;  // matched at begin(): its posted receive's cookie
  uint32_t drv[2] = {0, 0};     // the driver's own words (rdma: sender's slot, pull slot)
  int unode = -1;               // node in the unexpected list while unclaimed
  uint8_t* base = nullptr;      // where the bytes go; null: drop them
  UBuf ubuf;
  RecvRequest req;
};

/// Driver hooks the core calls off the hot path.
class RecvHooks {
 public:
  virtual ~RecvHooks() = default;
  /// Copy a buffered message into the receive that claimed it. False: the driver failed the
  /// endpoint (which completed the receive with its error).
  virtual bool copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n);
  /// A receive claimed buffered message m whose bytes are not all in (rdma: a rendezvous
  /// request, answered now). Its receive was completed already if it was too small
  /// (claim_err).
  virtual void claimed(int m) { (void)m; }
};

/// post_recv's defaults: no driver step per posted receive, no message held by the driver.
struct NoPosted {
  void operator()(int) const {}
};
struct NotWaiting {
  bool operator()(uint64_t) const { return false; }
};

}  // namespace gw::core
