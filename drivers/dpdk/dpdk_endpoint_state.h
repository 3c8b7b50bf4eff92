/// @file dpdk_endpoint_state.h
/// The records a DpdkEndpoint keeps (dpdk_endpoint.h): send slots, packets in flight, receive
/// slots, device-memory staging windows, the set-up's authentication. Kept apart so the
/// endpoint class reads as its operations.
#pragma once

#include <cstdint>
#include <memory>

#include "dpdk_transport.h"
#include "gw_auth.h"

namespace gw::drv::dpdk::ep_state {

/// Authentication (set-up only): one half of it, and what SYNs / SYN-ACKs carry.
struct Auth {
  std::unique_ptr<auth::Client> cli;
  std::unique_ptr<auth::Server> srv;
  uint8_t out[kSynAckHello] = {};
  uint16_t len = 0;
  uint32_t synack_wnd = 0;
  bool proof_sent = false, authed = false;
  Status error;  // passive: why the dialler was refused
};

struct SendSlot {
  SendRequest req;
  uint32_t last_seq = 0;
  bool segmented = false;
  bool dev = false;  // device memory: sent from staged windows (dpdk_staging.cc)
};
/// A window of a device send staged in a pinned slot; held until its packets are acked.
struct TxWin {
  int slot = -1;
  uint32_t msg = 0;
  uint64_t off = 0, len = 0;
  uint32_t last_seq = 0;
  bool sent = false;
};
/// What staging adds to the core's message (same slot numbers).
struct RxDev {
  bool dev = false;      // the receive buffer is device memory
  bool arrived = false;  // every packet is in; finished once `copies` is 0
  uint32_t copies = 0;   // host-to-device copies in flight
};
struct TxPkt {
  const uint8_t* data = nullptr;
  uint64_t tag = 0, msg_len = 0, offset = 0, sent = 0;
  uint32_t msg_id = 0;
  uint16_t len = 0;
  uint16_t batch = 0;  // messages in a kBatch packet (0: kData)
  uint8_t tries = 0;
  uint8_t link = 0;  // where it was last sent (several links)
  bool sacked = false, fast = false;
  bool on_link = false;  // counted in flight on `link`
};
struct RxSlot {
  WireHdr h{};
  rte_mbuf* m = nullptr;  // held packet; null once placed
  uint32_t off = 0;       // payload offset in m
  uint32_t sub = 0;       // kBatch: messages of it already consumed
  int msg = -1;
  bool present = false;
};

}  // namespace gw::drv::dpdk::ep_state
