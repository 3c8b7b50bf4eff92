/// @file tcp_slots.h
/// The TCP data path's own fixed-capacity pieces (Ring and SlotList are in gw_slots.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gw_slots.h"
#include "tcp_wire.h"

namespace gw::drv::tcp {

/// One chunk of an outgoing message, queued on one stream.
struct Chunk {
  FrameHeader hdr;
  const uint8_t* payload = nullptr;  // null for device memory until its staging copy is done
  int send_slot = -1;
  size_t done = 0;               // bytes of header + payload already written
  const uint8_t* dev = nullptr;  // device memory to stage (drivers/tcp/tcp_staging.cc)
  int stage_slot = -1;           // its slot in the endpoint's send pool
  uint64_t end = 0;              // tcp.ifaces: the stream's byte count once it is written
};

}  // namespace gw::drv::tcp
