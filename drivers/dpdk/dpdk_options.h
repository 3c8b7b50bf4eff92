// The dpdk driver's configuration keys (registered with the driver) and their reading.
#pragma once

#include <cstdint>
#include <string>

#include "dpdk_fault.h"
#include "dpdk_port.h"
#include "gw_config.h"
#include "gw_staging.h"
#include "gw_status.h"

namespace gw::drv::dpdk {

/// The transport's settings, read once at open (read_options).
struct Options {
  uint32_t ip = 0;        ///< network order
  uint16_t udp_port = 0;  ///< network order
  int window = 256;       ///< packets in flight per connection (power of two)
  int max_outstanding = 1024;
  int cq_depth = 65536;
  int max_endpoints = 1024;
  int held_max = 4096;  ///< out-of-order packets held per transport
  uint64_t unexpected_bytes = 0;
  uint64_t max_message = 0;
  uint64_t rto_min_ns = 0, rto_max_ns = 0, peer_timeout_ns = 0, heartbeat_ns = 0;
  uint64_t linger_ns = 0;
  uint64_t link_timeout_ns = 0, link_probe_ns = 0;  ///< several links (dpdk_links.h)
  bool checksum = true;
  bool zero_copy = false;
  bool incast_credits = true;  ///< receiver-driven credits (dpdk_credit.h)
  uint32_t zero_copy_min = 0;
  uint32_t seg_payload = 0;       ///< payload bytes per packet (from the MTU)
  StagingPool::Options staging;   ///< device memory: send windows (per endpoint)
  uint32_t staging_rx_slots = 0;  ///< device memory: receive slots of one packet (per transport)
};

/// Options whose final value depends on the port (known after Port::open).
struct Choices {
  int64_t window = 0;
  std::string checksum, zero_copy, ip;
  std::string ifaces;  ///< several links: one port per interface
  FaultProbs rx, tx;
  uint64_t fault_seed = 0;
};

/// The EAL's arguments from [dpdk].
struct EalOptions {
  std::string lcores, file_prefix, iova_mode, extra;
  int memory_mb = 0, log_level = 0;
  bool no_huge = true, pci = false;
};

/// Every [dpdk] key the transport reads (read_eal_options the EAL's), range-checked.
/// @return InvalidArgument naming the key and its range.
Status read_options(const Config& cfg, PortOptions* po, Options* o, Choices* c);
/// The EAL's keys (eal_args). @return InvalidArgument naming the key and its range.
Status read_eal_options(const Config& cfg, EalOptions* e);

}  // namespace gw::drv::dpdk
