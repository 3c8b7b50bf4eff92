// Port and mempool set-up and teardown.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_port.h"

#include <rte_bus_vdev.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "dpdk_memif.h"
#include "log.h"

namespace gw::drv::dpdk {
namespace {

std::atomic<int> g_serial{0};
constexpr int kMaxJumbo = 9000;  // larger frames buy nothing and need huge mbufs

Status eth_error(const std::string& what, const std::string& port, int rc) {
  return Status(Code::kSystemError,
                "dpdk: " + what + " on port " + port + " failed: " + rte_strerror(-rc));
}

}  // namespace

Result<std::unique_ptr<Port>> Port::open(const PortOptions& o) {
  std::unique_ptr<Port> p(new Port());
  GW_RETURN_IF_ERROR(p->setup(o));
  return p;
}

uint32_t Port::speed_mbps() const {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(id_, &link) != 0) return 0;
  return link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed;
}

bool Port::link_up() const {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

Status Port::setup(const PortOptions& o) {
  const int serial = g_serial++;
  GW_RETURN_IF_ERROR(attach(o, serial));
  have_port_ = true;
  rte_eth_dev_info info{};
  rte_eth_conf conf{};
  GW_RETURN_IF_ERROR(configure(o, &info, &conf));
  GW_RETURN_IF_ERROR(make_pools(o, serial));
  return start_queues(o, info, conf);
}

// A ring-bus slot, a vdev made here, or a probed device.
Status Port::attach(const PortOptions& o, int serial) {
  if (!o.ring_bus.empty()) {
    GW_ASSIGN_OR_RETURN(ring_, ring_bus_join(o.ring_bus, o.mbufs, std::min(o.mtu, kMaxJumbo)));
    bus_ = o.ring_bus;
    name_ = "net_ring_gw" + std::to_string(serial);
    ntx_ = kRingBusMax;
    int port = rte_eth_from_rings(name_.c_str(), &ring_.rx, 1, ring_.tx.data(),
                                  static_cast<unsigned>(ntx_), 0);
    if (port < 0) {
      return Status(Code::kUnavailable,
                    "dpdk: rte_eth_from_rings(" + name_ + ") failed: " + rte_strerror(rte_errno));
    }
    id_ = static_cast<uint16_t>(port);
    own_vdev_ = true;
    rx_pool_ = tx_pool_ = ring_.pool;
  } else if (!o.vdev.empty()) {
    std::string spec = o.vdev;
    std::replace(spec.begin(), spec.end(), ';', ',');
    auto comma = spec.find(',');
    name_ = spec.substr(0, comma);
    std::string args = comma == std::string::npos ? "" : spec.substr(comma + 1);
    uint16_t existing;
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &existing) == 0) {
      return Status(Code::kUnavailable, "dpdk: vdev " + name_ +
                                            " is already in use in this process; give each "
                                            "transport its own (net_memif0, net_memif1, ...)");
    }
    GW_RETURN_IF_ERROR(claim_memif_socket(o.vdev));
    int rc = rte_vdev_init(name_.c_str(), args.c_str());
    if (rc != 0) {
      return Status(Code::kUnavailable, "dpdk: rte_vdev_init(\"" + name_ + "\", \"" + args +
                                            "\") failed: " + rte_strerror(-rc) +
                                            " (is the PMD installed, the socket path "
                                            "writable, the interface present?)");
    }
    own_vdev_ = true;
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &id_) != 0)
      return Status(Code::kUnavailable, "dpdk: vdev " + name_ + " made no ethdev port");
  } else if (!o.device.empty()) {
    name_ = o.device;
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &id_) != 0) {
      return Status(Code::kUnavailable, "dpdk: no probed device named " + name_ +
                                            " (bind it to vfio-pci and set dpdk.pci = true)");
    }
  } else {
    return Status(Code::kUnavailable,
                  "dpdk: no device given: set dpdk.vdev (e.g. vdev=net_memif0;role=server), "
                  "dpdk.ring (an in-process ring bus) or dpdk.device");
  }
  return Status();
}

// Driver facts, MTU and rte_eth_dev_configure.
Status Port::configure(const PortOptions& o, rte_eth_dev_info* infop, rte_eth_conf* confp) {
  rte_eth_dev_info& info = *infop;
  rte_eth_conf& conf = *confp;
  if (int rc = rte_eth_dev_info_get(id_, &info); rc != 0)
    return eth_error("rte_eth_dev_info_get", name_, rc);
  driver_ = info.driver_name ? info.driver_name : "?";
  multi_seg_ = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  if (multi_seg_) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  // memif checks no frame length (a frame is a descriptor chain of any length): a jumbo MTU
  // is gradwire's alone, and the device, whose rte_eth_dev_configure refuses frames beyond
  // max_rx_pktlen (1518), keeps its own.
  const bool memif = driver_ == "net_memif";
  int mtu = std::min(o.mtu, memif ? kMemifMaxMtu : kMaxJumbo);
  const int wire_mtu = memif && mtu > RTE_ETHER_MTU ? mtu : 0;
  if (wire_mtu) mtu = 0;
  if (mtu > static_cast<int>(info.max_mtu)) {
    log::get("gw.drv.dpdk")
        ->warn(
            "dpdk: port {} ({}) takes an MTU of at most {}, not {}; "
            "using {}",
            name_, driver_, info.max_mtu, mtu, info.max_mtu);
    mtu = info.max_mtu;
  }
  if (mtu > 0) {
    if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER)
      conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
    conf.rxmode.mtu = static_cast<uint32_t>(mtu);
  }
  ntx_ = std::min<int>(ntx_, std::max<int>(1, info.max_tx_queues));
  if (int rc = rte_eth_dev_configure(id_, 1, static_cast<uint16_t>(ntx_), &conf); rc != 0)
    return eth_error("rte_eth_dev_configure", name_, rc);
  if (mtu > 0) {
    int rc = rte_eth_dev_set_mtu(id_, static_cast<uint16_t>(mtu));
    if (rc != 0 && rc != -ENOTSUP) {  // ring ports: the MTU of rte_eth_dev_configure stands
      log::get("gw.drv.dpdk")
          ->warn("dpdk: port {} refused MTU {}: {}; using its own", name_, mtu, rte_strerror(-rc));
    }
  }
  if (rte_eth_dev_get_mtu(id_, &mtu_) != 0) mtu_ = 1500;
  if (wire_mtu) mtu_ = static_cast<uint16_t>(wire_mtu);
  rte_eth_macaddr_get(id_, &mac_);
  return Status();
}

Status Port::make_pools(const PortOptions& o, int serial) {
  const bool memif = driver_ == "net_memif";
  if (rx_pool_) return Status();  // the ring bus's shared pool
  std::string rxn = "gwrx" + std::to_string(serial), txn = "gwtx" + std::to_string(serial);
  uint16_t room = static_cast<uint16_t>(
      std::max<int>(RTE_MBUF_DEFAULT_BUF_SIZE, std::min<int>(mtu_ + 128 + 64, 9216 + 256)));
  uint16_t tx_room = room;
  // memif with its buffer size given (jumbo frames): a receive mbuf holds one buffer, so
  // the PMD takes its fast path (one mbuf per descriptor, allocated in bulk); transmit mbufs
  // are larger than a buffer, so the PMD packs a frame's segments (headers, then the
  // payload in the caller's memory) into one descriptor instead of one per segment.
  if (const int bsize = memif ? std::atoi(vdev_arg(o.vdev, "bsize").c_str()) : 0;
      bsize > 0 && bsize <= UINT16_MAX - 2 * RTE_PKTMBUF_HEADROOM) {
    room = static_cast<uint16_t>(bsize + RTE_PKTMBUF_HEADROOM);
    tx_room = static_cast<uint16_t>(room + RTE_PKTMBUF_HEADROOM);
  }
  // memif's jumbo buffers: fewer of them (a receive pool of at most ~64 MiB, at least 1023
  // mbufs). A transmit mbuf lives only until the PMD has copied it (a retransmission builds
  // a new frame), so that transmit pool takes 1023; the receive pool also holds the packets
  // that wait for a hole to fill.
  const bool big = tx_room > room;
  const int fit = big ? static_cast<int>((64u << 20) / (room + 256u)) : o.mbufs;
  const unsigned n = static_cast<unsigned>(std::max(1023, std::min(o.mbufs, fit)));
  const unsigned ntx = big ? 1023 : o.tx_mbufs > 0 ? static_cast<unsigned>(o.tx_mbufs) : n;
  rx_pool_ = rte_pktmbuf_pool_create(rxn.c_str(), n, 256, 0, room, 0);
  tx_pool_ = rte_pktmbuf_pool_create(txn.c_str(), ntx, 256, 0, tx_room, 0);
  rx_mbufs_ = static_cast<int>(n);
  own_pools_ = true;
  if (!rx_pool_ || !tx_pool_) {
    return Status(Code::kResourceExhausted,
                  "dpdk: mempools of " + std::to_string(n) + " mbufs for port " + name_ + ": " +
                      rte_strerror(rte_errno) + " (raise dpdk.memory_mb or lower dpdk.mbufs)");
  }
  return Status();
}

Status Port::start_queues(const PortOptions& o, const rte_eth_dev_info& info,
                          const rte_eth_conf& conf) {
  uint16_t rxd = static_cast<uint16_t>(o.rx_desc), txd = static_cast<uint16_t>(o.tx_desc);
  rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rxd, &txd);
  const int socket = std::max(0, rte_eth_dev_socket_id(id_));
  if (int rc =
          rte_eth_rx_queue_setup(id_, 0, rxd, static_cast<unsigned>(socket), nullptr, rx_pool_);
      rc != 0)
    return eth_error("rte_eth_rx_queue_setup", name_, rc);
  for (int q = 0; q < ntx_; ++q) {
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    if (int rc = rte_eth_tx_queue_setup(id_, static_cast<uint16_t>(q), txd,
                                        static_cast<unsigned>(socket), &txc);
        rc != 0)
      return eth_error("rte_eth_tx_queue_setup", name_, rc);
  }
  if (int rc = rte_eth_dev_start(id_); rc != 0) return eth_error("rte_eth_dev_start", name_, rc);
  started_ = true;
  return Status();
}

Port::~Port() {
  if (have_port_) {
    if (started_) rte_eth_dev_stop(id_);
    rte_eth_dev_close(id_);
    if (own_vdev_) rte_vdev_uninit(name_.c_str());
  }
  if (ring_.index >= 0) ring_bus_leave(bus_, ring_.index);
  if (own_pools_) {
    rte_mempool_free(rx_pool_);
    rte_mempool_free(tx_pool_);
  }
}

}  // namespace gw::drv::dpdk
