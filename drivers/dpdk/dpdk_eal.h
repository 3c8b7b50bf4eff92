/// @file dpdk_eal.h
/// The EAL, initialised once per process from the [dpdk] configuration of the first transport
/// opened (later transports reuse it and get a warning if their EAL keys differ); and the
/// in-process ring bus: up to kRingBusMax ports of one process exchange frames through
/// rte_rings (port k receives on ring k and sends to peer j on its transmit queue j).
/// Thread-safety: all functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gw_config.h"
#include "gw_status.h"

struct rte_ring;
struct rte_mempool;

namespace gw::drv::dpdk {

inline constexpr int kRingBusMax = 16;

/// Initialise the EAL unless done. @return Unavailable (EAL refused: its reason and the
/// arguments), or the first call's failure again.
Status eal_init(const Config& cfg);

/// The EAL arguments `cfg` asks for (for logs and tests).
Result<std::vector<std::string>> eal_args(const Config& cfg);

/// A slot on the ring bus `bus`: its index and the rings of all slots.
struct RingSlot {
  int index = -1;
  rte_ring* rx = nullptr;
  std::vector<rte_ring*> tx;    ///< kRingBusMax rings, one per possible peer
  rte_mempool* pool = nullptr;  ///< the bus's mbufs (process lifetime)
};

/// Take a free slot on `bus` (creating its rings and a pool of `mbufs` on first use).
/// @return ResourceExhausted when all kRingBusMax slots are taken or memory is short.
/// `mtu` > 1500 takes mbufs from a pool whose mbufs hold a frame of that MTU.
Result<RingSlot> ring_bus_join(const std::string& bus, int mbufs, int mtu);
/// The receive ring of slot `index` on `bus` (null if none): tests inject frames here.
rte_ring* ring_bus_rx(const std::string& bus, int index);
/// Give the slot back; the rings stay for the life of the process.
void ring_bus_leave(const std::string& bus, int index);

}  // namespace gw::drv::dpdk
