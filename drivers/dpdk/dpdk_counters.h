/// @file dpdk_counters.h
/// DpdkCounters: what a DpdkTransport counts (its stats(); DpdkTransport::Counters).
/// Thread-safety: none (the transport's driving thread).
#pragma once

#include <cstdint>

namespace gw::drv::dpdk {

struct DpdkCounters {
  uint64_t bytes_sent = 0, bytes_received = 0, msgs_sent = 0;
  uint64_t pkts_sent = 0, pkts_received = 0, acks_sent = 0, retransmits = 0;
  uint64_t timeouts = 0, fast_retransmits = 0, dup_pkts = 0, out_of_order = 0;
  uint64_t window_drops = 0, held_drops = 0, tx_ring_full = 0, tx_alloc_fail = 0;
  uint64_t bad_frames = 0, bad_checksum = 0, not_for_us = 0, unknown_conn = 0;
  uint64_t bad_header = 0, bad_segment = 0;
  uint64_t zero_copy_pkts = 0, copied_pkts = 0, heartbeats = 0;
  uint64_t syn_parked = 0, syn_dropped = 0, batch_pkts = 0;
  uint64_t staged_tx_bytes = 0, staged_rx_bytes = 0;
  uint64_t links_down = 0, links_up = 0, link_probes = 0, link_resent = 0, link_reordered = 0;
};

}  // namespace gw::drv::dpdk
