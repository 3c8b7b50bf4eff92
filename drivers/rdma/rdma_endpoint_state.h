/// @file rdma_endpoint_state.h
/// The records an RdmaEndpoint and its parts share (rdma_endpoint.h): send slots, rendezvous
/// receives, held messages and queued work. Kept apart so the classes read as their
/// operations.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gw_core.h"
#include "gw_slots.h"
#include "rdma_transport.h"

namespace gw::drv::rdma::ep_state {

inline constexpr uint32_t kNoSlot = UINT32_MAX;

struct SendSlot {
  SendRequest req;
  RegCache::Entry* reg = nullptr;  // taken from the cache for a rendezvous send
  uint64_t off[kMaxQps] = {};      // per stripe: next byte to WRITE
  uint32_t lkey = 0;
  uint8_t stripes_left = 0;  // WRITEs with immediate not yet completed
  bool awaiting_cts = false;
  bool used = false;
  bool staged = false;            // CUDA memory copied out through pinned buffers
  bool windowed = false;          // the receiver stages: it asks for windows (kWin)
  uint64_t win_next = 0;          // windowed: the next window's offset
  uint64_t copied[kMaxQps] = {};  // staged: per stripe, bytes whose copy has started
};

struct RndvRecv {
  RecvRequest req;
  uint64_t tag = 0, len = 0;
  RegCache::Entry* reg = nullptr;  // the receive buffer's, or the bounce buffer's
  uint8_t stripes_left = 0;        // WRITEs with immediate still to come
  bool used = false;
  bool has_req = true;   // false: pulled unexpectedly, or advertised and not yet claimed
  int adv_recv = -1;     // advertised: its posted receive (core recvs()) until a WRITE claims it
  int msg = -1;          // unexpected pull: the core's message whose buffer the data lands in
  bool staged = false;   // CUDA memory: windows through pinned buffers (rdma_staging.cc)
  uint32_t send_id = 0;  // staged: the sender's slot, named in each window
  uint64_t next_off = 0, done = 0;  // staged: bytes asked for, bytes copied in
};

/// A message left in lane 0's receive buffer `slot` (back-pressure), payload at `off`.
struct Held {
  MsgHdr h;
  uint32_t slot = 0, off = 0;
};

struct TxItem {
  MsgType type = MsgType::kEager;
  bool write = false;    // rendezvous data for send slot `id`
  uint8_t stripes = 1;   // CTS and write: lanes the data is spread over
  bool started = false;  // write: its stripe offsets are set (at the queue's front)
  uint32_t id = 0, id2 = 0;
  uint64_t tag = 0, len = 0, addr = 0;
  uint64_t base = 0;  // write: offset in the message of the bytes to write (windows)
  uint32_t rkey = 0;
};

}  // namespace gw::drv::rdma::ep_state
