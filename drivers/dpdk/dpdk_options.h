// The dpdk driver's configuration keys (registered with the driver) and their reading.
#pragma once

#include <cstdint>
#include <string>

#include "dpdk_fault.h"
#include "dpdk_port.h"
#include "dpdk_transport.h"
#include "gw_config.h"
#include "gw_status.h"

namespace gw::drv::dpdk {

/// Options whose final value depends on the port (known after Port::open).
struct Choices {
  int64_t window = 0;
  std::string checksum, zero_copy, ip;
  FaultProbs rx, tx;
  uint64_t fault_seed = 0;
};

/// Every [dpdk] key the transport reads (eal_args reads the EAL's), range-checked.
/// @return InvalidArgument naming the key and its range.
Status read_options(const Config& cfg, PortOptions* po, Options* o, Choices* c);

}  // namespace gw::drv::dpdk
