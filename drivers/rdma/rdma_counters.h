/// @file rdma_counters.h
/// What the rdma transport counts (driver_stats(); msgs_received, unexpected_msgs,
/// truncated_recvs and endpoint_errors are the core's).
/// Thread-safety: none; owned by one RdmaTransport, written by its endpoints.
#pragma once

#include <cstdint>

namespace gw::drv::rdma {

struct Counters {
  uint64_t bytes_sent = 0, bytes_received = 0, msgs_sent = 0;
  uint64_t eager_sent = 0, rndv_sent = 0;
  uint64_t zero_copy_sends = 0;
  uint64_t protocol_errors = 0;
  uint64_t credit_stalls = 0, credit_writes = 0, cq_events = 0, inline_sends = 0;
  uint64_t striped_sends = 0, unexpected_pulls = 0;
  uint64_t adverts_sent = 0, adverts_dropped = 0, advert_writes = 0;
  uint64_t advert_writes_received = 0, adverts_received = 0;
  uint64_t staged_sends = 0, staged_recvs = 0, staging_windows = 0;
  uint64_t held_stalls = 0;  // times messages began to wait in receive buffers
  uint64_t heartbeats_sent = 0, heartbeats_received = 0, peer_timeouts = 0;
};

}  // namespace gw::drv::rdma
