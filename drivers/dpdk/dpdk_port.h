/// @file dpdk_port.h
/// RAII owners of one DPDK port and its mempools: made from a vdev string
/// ("net_memif0,role=server,socket=/run/x.sock"), a slot on the in-process ring bus, or the
/// name of a probed device (PCI address); configured with one receive queue and one transmit
/// queue per ring-bus peer (one elsewhere), started, and stopped/closed/removed on
/// destruction. Ring-bus ports share one process-lifetime mempool, because a frame's mbuf
/// travels to the peer port and may be freed there after this port is gone.
/// Thread-safety: none (owned by one transport).
#pragma once

#include <rte_ether.h>

#include <cstdint>
#include <memory>
#include <string>

#include "dpdk_eal.h"
#include "gw_status.h"

struct rte_mempool;
struct rte_eth_dev_info;
struct rte_eth_conf;

namespace gw::drv::dpdk {

/// Above this MTU a connection's default window is 128 packets instead of 1024.
inline constexpr int kJumboWindowMtu = 9000;

struct PortOptions {
  std::string vdev;      ///< vdev string, ',' separated (';' accepted for ',')
  std::string ring_bus;  ///< ring bus name (instead of vdev)
  std::string device;    ///< name of a probed device, e.g. 0000:3b:00.0
  int mtu = 0;           ///< 0: the device's (memif: see vdev_with_defaults)
  int rx_desc = 1024, tx_desc = 1024;
  int mbufs = 8191;
  int tx_mbufs = 0;  ///< 0: as `mbufs`; links 1.. take 1023 (their frames come from link 0's)
};

class Port {
 public:
  /// @return InvalidArgument (bad spec), Unavailable (no such device, vdev refused),
  ///         ResourceExhausted (mempool), SystemError (configure/start failed).
  static Result<std::unique_ptr<Port>> open(const PortOptions& o);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  uint16_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& driver() const { return driver_; }
  uint16_t mtu() const { return mtu_; }
  const rte_ether_addr& mac() const { return mac_; }
  bool multi_seg_tx() const { return multi_seg_; }
  bool is_ring() const { return ring_.index >= 0; }
  int ring_index() const { return ring_.index; }
  int tx_queues() const { return ntx_; }
  rte_mempool* tx_pool() const { return tx_pool_; }
  /// Mbufs of this port's own receive pool (0: a shared pool, the ring bus's).
  int rx_mbufs() const { return rx_mbufs_; }
  uint32_t speed_mbps() const;
  /// The link is up (memif: the peer process is attached).
  bool link_up() const;

 private:
  Port() = default;
  Status setup(const PortOptions& o);  // the four below, in order
  Status attach(const PortOptions& o, int serial);
  Status configure(const PortOptions& o, rte_eth_dev_info* info, rte_eth_conf* conf);
  Status make_pools(const PortOptions& o, int serial);
  Status start_queues(const PortOptions& o, const rte_eth_dev_info& info, const rte_eth_conf& conf);

  uint16_t id_ = 0;
  bool have_port_ = false, started_ = false, own_vdev_ = false;
  std::string name_, driver_, bus_;
  RingSlot ring_;
  uint16_t mtu_ = 1500;
  rte_ether_addr mac_{};
  bool multi_seg_ = false;
  int ntx_ = 1;
  rte_mempool* rx_pool_ = nullptr;
  rte_mempool* tx_pool_ = nullptr;
  bool own_pools_ = false;
  int rx_mbufs_ = 0;
};

}  // namespace gw::drv::dpdk
