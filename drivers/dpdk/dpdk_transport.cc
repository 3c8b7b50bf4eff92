// DpdkTransport: port set-up, registration, stats (its keys and their reading:
// dpdk_options.cc). Connections: dpdk_connect.cc; progress: dpdk_progress.cc.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_transport.h"

#include <arpa/inet.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "dpdk_endpoint.h"
#include "dpdk_memif.h"
#include "dpdk_options.h"
#include "gw_transport_driver.h"
#include "log.h"

namespace gw::drv::dpdk {

namespace {
// dpdk.ifaces: link 0's vdev "<kind>0<args>;iface=<first>" from dpdk.vdev (its kind and
// arguments; net_af_packet when empty). Links 1.. are made alike by open_links.
Status links_vdev(const std::string& list, PortOptions* po, std::vector<std::string>* ifaces,
                  std::string* kind, std::string* args) {
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) ifaces->push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  const size_t cut = po->vdev.find_first_of(";,");
  std::string name = po->vdev.substr(0, cut);
  while (!name.empty() && std::isdigit(static_cast<unsigned char>(name.back()))) name.pop_back();
  *kind = name.empty() ? "net_af_packet" : name;
  *args = cut == std::string::npos ? "" : po->vdev.substr(cut);
  std::replace(args->begin(), args->end(), ',', ';');
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "dpdk.ifaces = '" + list + "': " + why);
  };
  if (ifaces->empty() || ifaces->size() > static_cast<size_t>(kMaxLinks))
    return bad("give 1 to " + std::to_string(kMaxLinks) + " interfaces");
  if (*kind != "net_af_packet" && *kind != "net_af_xdp")
    return bad("several links take net_af_packet or net_af_xdp ports, not " + *kind);
  if (!po->ring_bus.empty() || !po->device.empty()) return bad("not with dpdk.ring or dpdk.device");
  if (args->find("iface=") != std::string::npos)
    return bad("name the interfaces in dpdk.ifaces only (not dpdk.iface or the vdev's iface=)");
  po->vdev = *kind + "0" + *args + ";iface=" + ifaces->front();
  return Status();
}
}  // namespace

Result<std::unique_ptr<Transport>> DpdkTransport::open(const Config& cfg) {
  std::unique_ptr<DpdkTransport> t(new DpdkTransport());
  GW_RETURN_IF_ERROR(t->init(cfg));
  return std::unique_ptr<Transport>(std::move(t));
}

Status DpdkTransport::init(const Config& cfg) {
  log_ = log::get("gw.drv.dpdk");
  PortOptions po;
  Choices ch;
  GW_RETURN_IF_ERROR(read_options(cfg, &po, &opts_, &ch));
  std::vector<std::string> ifaces;
  std::string link_kind, link_args;
  if (!ch.ifaces.empty())
    GW_RETURN_IF_ERROR(links_vdev(ch.ifaces, &po, &ifaces, &link_kind, &link_args));
  po.vdev = vdev_with_defaults(po.vdev, &po.mtu);
  GW_RETURN_IF_ERROR(check_xdp_prog(po.vdev, ntohs(opts_.udp_port)));
  wait_for_memif_server(po.vdev);
  if (po.vdev.empty() && po.ring_bus.empty() && po.device.empty()) {
    return Status(Code::kUnavailable,
                  "dpdk: no device configured (set dpdk.vdev, dpdk.ring or dpdk.device, e.g. "
                  "dpdk:vdev=net_memif0,role=server,socket=/tmp/gw.sock)");
  }
  GW_RETURN_IF_ERROR(init_window(ch.window, &po));
  open_gpu();

  GW_ASSIGN_OR_RETURN(key_, auth::process_key());
  GW_RETURN_IF_ERROR(eal_init(cfg));
  GW_ASSIGN_OR_RETURN(port_, Port::open(po));
  if (ifaces.size() > 1) GW_RETURN_IF_ERROR(open_links(po, link_kind, link_args, ifaces));
  std::string ip;
  GW_RETURN_IF_ERROR(init_identity(ch.ip, &ip));
  init_features(ch);
  GW_RETURN_IF_ERROR(init_address());
  GW_RETURN_IF_ERROR(init_state());
  log_->info(
      "dpdk: port {} ({}) MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} IP {} UDP {}; "
      "MTU {} ({} payload bytes per packet); window {} packets; checksums {}; "
      "zero copy {}{}",
      port_->name(), port_->driver(), mac_.addr_bytes[0], mac_.addr_bytes[1], mac_.addr_bytes[2],
      mac_.addr_bytes[3], mac_.addr_bytes[4], mac_.addr_bytes[5], ip, ntohs(opts_.udp_port),
      port_->mtu(), opts_.seg_payload, opts_.window, opts_.checksum ? "on" : "off",
      opts_.zero_copy ? "on" : "off",
      opts_.zero_copy ? ""
      : port_->is_ring()
          ? " (ring ports hand mbufs to a peer in this process, which may read them after "
            "the send completed)"
      : !port_->multi_seg_tx() ? " (the port does not take chained mbufs)"
                               : " (dpdk.zero_copy or IOVA mode)");
  return Status();
}

Status DpdkTransport::init_window(int64_t w, PortOptions* po) {
  // A large window lets the sender run ahead while a descheduled receiver is not polling
  // (what the kernel's socket buffers do for TCP); ring-bus ranks share one pool and one
  // receive ring per port, so they get a smaller one.
  // Jumbo frames (memif's default): 128 packets are 4 MiB in flight. With 256 (8 MiB) a hole's
  // retransmission queued behind twice as much at the receiver: at 1 % loss goodput fell to
  // 0.50-0.53x lossless, against 0.96-0.99x with 128 and the same lossless rate.
  if (w == 0) w = !po->ring_bus.empty() ? 256 : po->mtu > kJumboWindowMtu ? 128 : 1024;
  if (w < 64 || w > 4096 || !std::has_single_bit(static_cast<uint64_t>(w))) {
    return Status(Code::kInvalidArgument,
                  "dpdk.window = " + std::to_string(w) + " must be a power of two in 64..4096");
  }
  opts_.window = static_cast<int>(w);
  const bool af_xdp = po->vdev.rfind("net_af_xdp", 0) == 0;
  if (po->rx_desc == 0) po->rx_desc = af_xdp ? 2 * opts_.window : 1024;
  if (po->mbufs == 0) po->mbufs = af_xdp ? 32767 : 8191;
  credit_.init(static_cast<uint32_t>(w), opts_.incast_credits);
  return Status();
}

Status DpdkTransport::init_identity(const std::string& ip_opt, std::string* ip) {
  mac_ = port_->mac();
  if (port_->is_ring() || rte_is_zero_ether_addr(&mac_)) {
    // Ring ports have no MAC of their own: make a locally administered one per slot.
    const uint8_t m[6] = {0x02,
                          0x47,
                          0x57,
                          static_cast<uint8_t>(::getpid() >> 8),
                          static_cast<uint8_t>(::getpid()),
                          static_cast<uint8_t>(port_->ring_index() + 1)};
    std::memcpy(mac_.addr_bytes, m, 6);
  }
  *ip = ip_opt;
  if (ip->empty()) {
    const uint8_t* b = mac_.addr_bytes;
    *ip = "10." + std::to_string(b[3]) + "." + std::to_string(b[4]) + "." +
          std::to_string(b[5] == 0 || b[5] == 255 ? 1 : b[5]);
  }
  in_addr a{};
  if (inet_pton(AF_INET, ip->c_str(), &a) != 1)
    return Status(Code::kInvalidArgument, "dpdk.ip = '" + *ip + "' is not an IPv4 address");
  opts_.ip = a.s_addr;
  const uint32_t mtu = port_->mtu();
  if (mtu < 576) {
    return Status(Code::kUnavailable, "dpdk: port " + port_->name() + " has MTU " +
                                          std::to_string(mtu) +
                                          ", below the 576 bytes a frame "
                                          "needs; set dpdk.mtu (e.g. 1500) or the device's MTU");
  }
  opts_.seg_payload = mtu - static_cast<uint32_t>(kIpLen + kUdpLen + sizeof(WireHdr));
  // Held packets keep receive mbufs: never so many that the pool runs dry for the
  // retransmission that would release them.
  if (port_->rx_mbufs() > 0) opts_.held_max = std::min(opts_.held_max, port_->rx_mbufs() / 2);
  return Status();
}

void DpdkTransport::init_features(const Choices& ch) {
  const std::string &cks = ch.checksum, &zc = ch.zero_copy;
  opts_.zero_copy = zc == "on" || (zc == "auto" && port_->multi_seg_tx() && !port_->is_ring() &&
                                   rte_eal_iova_mode() == RTE_IOVA_VA);
  if (zc == "on" && !port_->multi_seg_tx()) {
    opts_.zero_copy = false;
    log_->warn(
        "dpdk: zero copy asked for, but port {} ({}) does not take chained mbufs; "
        "payload is copied into mbufs",
        port_->name(), port_->driver());
  }
  const FaultProbs& rx = ch.rx;
  const FaultProbs& tx = ch.tx;
  // memif is shared memory between two processes of one host: like loopback TCP, which
  // checks no checksum either, it cannot corrupt a frame, and a checksum on each side was a
  // whole extra pass over every payload byte. Injected corruption needs it (on both sides).
  opts_.checksum =
      cks == "on" ||
      (cks == "auto" && (port_->driver() != "net_memif" || rx.corrupt > 0 || tx.corrupt > 0));
  const uint64_t seed = ch.fault_seed;
  rx_fault_.init(rx, seed * 2 + 1 + port_->id());
  tx_fault_.resize(static_cast<size_t>(port_->tx_queues()));
  for (size_t q = 0; q < tx_fault_.size(); ++q)
    tx_fault_[q].init(tx, seed * 2 + 1001 + port_->id() + 7919 * q);
  if (rx.any() || tx.any()) {
    log_->info(
        "dpdk: fault injection on: rx drop {} dup {} reorder {} corrupt {}; tx drop {} "
        "dup {} reorder {} corrupt {}",
        rx.drop, rx.dup, rx.reorder, rx.corrupt, tx.drop, tx.dup, tx.reorder, tx.corrupt);
  }
}

Status DpdkTransport::init_address() {
  AddrPayload mine;
  mine.links = static_cast<uint8_t>(links());
  for (uint8_t k = 0; k < mine.links; ++k) std::memcpy(mine.mac[k], link_mac(k).addr_bytes, 6);
  mine.ip = opts_.ip;
  mine.port = opts_.udp_port;
  mine.ring = port_->is_ring() ? static_cast<uint8_t>(port_->ring_index()) : kNoRing;
  uint8_t payload[kAddrMax];
  encode_addr(mine, payload);
  GW_ASSIGN_OR_RETURN(addr_, Address::make("dpdk", kAddrVersion, {payload, addr_size(mine.links)}));

  props_.name = "dpdk";
  props_.device = port_->name() + " (" + port_->driver() + ")";
  props_.link_speed_mbps = port_->speed_mbps();
  for (const LinkPort& l : extra_) {
    props_.device += ", " + l.port->name();
    props_.link_speed_mbps += l.port->speed_mbps();
  }
  if (opts_.zero_copy) props_.zero_copy_kinds = {MemKind::kHost};
  props_.max_message_size = opts_.max_message;
  props_.max_outstanding = static_cast<size_t>(opts_.max_outstanding);
  return Status();
}

Status DpdkTransport::init_state() {
  core_.init("dpdk", log_, static_cast<size_t>(opts_.cq_depth),
             static_cast<size_t>(opts_.max_outstanding), opts_.unexpected_bytes);
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0)
    return Status(Code::kSystemError, std::string("dpdk: eventfd: ") + std::strerror(errno));
  conns_.resize(static_cast<size_t>(opts_.max_endpoints));
  for (int i = opts_.max_endpoints; i-- > 0;) free_conns_.push_back(i);
  // Random first generations: a transport that reuses a closed one's port and address (a ring
  // bus slot, a restarted process) must not take that one's late packets (a FIN) as its own.
  std::mt19937 rng(std::random_device{}());
  for (auto& cs : conns_) cs.gen = static_cast<uint16_t>(rng());
  rx_pkts_.resize(64);
  rx_faulted_.resize(2 * 64 + 2);
  txq_.resize(static_cast<size_t>(port_->tx_queues()));
  for (auto& q : txq_) q.reserve(64);
  tx_faulted_.resize(2 * 64 + 2);
  return Status();
}

DpdkTransport::~DpdkTransport() {
  end_background();
  if (log_->should_log(spdlog::level::debug)) {
    std::string s;
    for (const auto& [k, v] : stats())
      if (v) s += " " + k + "=" + std::to_string(v);
    log_->debug("dpdk: port {} closing; counters:{}", port_ ? port_->name() : "?", s);
  }
  flush_tx();
  // A peer still waiting for our last ack reads it from the device (memif: shared memory
  // that goes away with the port); without the linger it fails its send after its timeout.
  // memif: no rx_burst meanwhile. The peer closing its port makes DPDK's control thread here
  // unmap the shared regions (memif_disconnect) with no lock against a burst in progress on
  // this thread: a SIGSEGV in ~1 of 100-500 jobs, when the peer closed during one of the
  // linger's bursts. Its link going down ends the wait instead.
  if (peer_left_open_ && opts_.linger_ns > 0) {
    const bool memif = port_->driver() == "net_memif";
    const uint64_t end = now_ns() + opts_.linger_ns;
    while (now_ns() < end) {
      if (memif) {
        if (!port_->link_up()) break;
      } else {
        rte_mbuf* pkts[32];
        uint16_t n = rte_eth_rx_burst(port_->id(), 0, pkts, 32);
        rte_pktmbuf_free_bulk(pkts, n);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }
  if (event_fd_ >= 0) ::close(event_fd_);
  rx_fault_.release();
  for (auto& f : tx_fault_) f.release();
  for (auto& q : txq_) {
    for (rte_mbuf* m : q) rte_pktmbuf_free(m);
    q.clear();
  }
  free_links();
}

void DpdkTransport::endpoint_gone(DpdkEndpoint* ep) {
  if (!rx_copies_.empty()) forget_rx_copies(ep);
  eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end());
  uint32_t idx = ep->conn() & 0xffff;
  conns_[idx].ep = nullptr;
  free_conns_.push_back(static_cast<int>(idx));
}

DpdkEndpoint* DpdkTransport::lookup(uint32_t conn) const {
  uint32_t idx = conn & 0xffff;
  if (idx >= conns_.size()) return nullptr;
  const ConnSlot& cs = conns_[idx];
  return cs.ep && cs.gen == (conn >> 16) ? cs.ep : nullptr;
}

Result<size_t> DpdkTransport::post_recv_any(std::span<const RecvRequest> reqs) {
  for (const RecvRequest& r : reqs) {  // device memory: the receive pool first (dpdk_staging.cc)
    if (r.len > 0 && is_device(r.buf, r.mr)) {
      GW_RETURN_IF_ERROR(rx_pool().status());
      break;
    }
  }
  auto n = DriverTransport::post_recv_any(reqs);
  for (DpdkEndpoint* ep : eps_)
    if (ep->stalled()) ep->advance();
  return n;
}

std::map<std::string, uint64_t> DpdkTransport::driver_stats() const {
  const auto& c = counters_;
  const auto& rf = rx_fault_.counters();
  FaultCounters tf;
  for (const auto& f : tx_fault_) tf += f.counters();
  return {{"bytes_sent", c.bytes_sent},
          {"bytes_received", c.bytes_received},
          {"msgs_sent", c.msgs_sent},
          {"pkts_sent", c.pkts_sent},
          {"pkts_received", c.pkts_received},
          {"acks_sent", c.acks_sent},
          {"retransmits", c.retransmits},
          {"timeouts", c.timeouts},
          {"fast_retransmits", c.fast_retransmits},
          {"dup_pkts", c.dup_pkts},
          {"out_of_order", c.out_of_order},
          {"window_drops", c.window_drops},
          {"held_drops", c.held_drops},
          {"held_now", static_cast<uint64_t>(held_)},
          {"tx_ring_full", c.tx_ring_full},
          {"tx_alloc_fail", c.tx_alloc_fail},
          {"bad_frames", c.bad_frames},
          {"bad_checksum", c.bad_checksum},
          {"not_for_us", c.not_for_us},
          {"unknown_conn", c.unknown_conn},
          {"bad_header", c.bad_header},
          {"bad_segment", c.bad_segment},
          {"zero_copy_pkts", c.zero_copy_pkts},
          {"copied_pkts", c.copied_pkts},
          {"heartbeats", c.heartbeats},
          {"syn_parked", c.syn_parked},
          {"batch_pkts", c.batch_pkts},
          {"syn_dropped", c.syn_dropped},
          {"staged_tx_bytes", c.staged_tx_bytes},
          {"staged_rx_bytes", c.staged_rx_bytes},
          {"links_down", c.links_down},
          {"links_up", c.links_up},
          {"link_probes", c.link_probes},
          {"link_resent", c.link_resent},
          {"link_reordered", c.link_reordered},
          {"fault_rx_dropped", rf.dropped},
          {"fault_rx_duplicated", rf.duplicated},
          {"fault_rx_reordered", rf.reordered},
          {"fault_rx_corrupted", rf.corrupted},
          {"fault_tx_dropped", tf.dropped},
          {"fault_tx_duplicated", tf.duplicated},
          {"fault_tx_reordered", tf.reordered},
          {"fault_tx_corrupted", tf.corrupted}};
}

void DpdkTransport::fail_aborted(DpdkEndpoint* ep, const Status& st) { ep->abort(st); }

}  // namespace gw::drv::dpdk
