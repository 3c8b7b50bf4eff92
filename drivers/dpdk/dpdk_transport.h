/// @file dpdk_transport.h
/// DPDK transport: one port (memif, ring, af_packet or a PCI NIC) polled from user space.
/// Connections are demultiplexed by connection id on the one port; each has its own
/// reliability (packet sequence numbers, cumulative + selective acks, retransmission on timeout
/// with back-off, fast retransmit, a flow-control window), since the wire may drop, reorder and
/// duplicate. Payload is sent from the caller's memory as external mbuf buffers where the port
/// takes chained mbufs, and received straight into the posted buffer (one copy, from the mbuf).
/// Thread-safety: none (one thread drives a transport and its endpoints).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "dpdk_counters.h"
#include "dpdk_credit.h"
#include "dpdk_fault.h"
#include "dpdk_links.h"
#include "dpdk_options.h"
#include "dpdk_peer.h"
#include "dpdk_port.h"
#include "dpdk_wire.h"
#include "gw_auth.h"
#include "gw_config.h"
#include "gw_core.h"
#include "gw_driver_base.h"
#include "gw_slots.h"
#include "gw_staging.h"
#include "gw_transport.h"

struct rte_mbuf;
namespace spdlog {
class logger;
}

namespace gw::drv::dpdk {

class DpdkTransport;
class DpdkEndpoint;

/// A host-to-device copy of one received packet's payload, in flight (dpdk_staging.cc).
using RxCopy = core::RxCopy<DpdkEndpoint>;

class DpdkTransport final : public core::DriverTransport<DpdkTransport, DpdkEndpoint> {
 public:
  static Result<std::unique_ptr<Transport>> open(const Config& cfg);
  ~DpdkTransport() override;

  Result<std::unique_ptr<Endpoint>> connect(const ConnectParams& p, Deadline deadline) override;
  Result<MemoryRegion> register_memory(void* addr, size_t length, MemKind kind) override;
  /// The core's, with the receive pool made first for device memory; stalled endpoints retry.
  Result<size_t> post_recv_any(std::span<const RecvRequest> reqs) override;

  // --- DriverTransport's hooks ---
  /// Nothing to wake: a sleeping idle_wait() sees an abort within its 1 ms back-off.
  void wake() {}
  std::map<std::string, uint64_t> driver_stats() const;
  /// An eventfd that is never signalled: it only makes CompletionQueue::wait() hand its sleep
  /// to cq_sleep_poll(), which polls while traffic is in flight and backs off when idle.
  int cq_wait_fd() const { return event_fd_; }
  Result<size_t> cq_sleep_poll(std::span<Completion> out, int timeout_ms) {
    return idle_wait(out, timeout_ms);
  }
  /// Packet-sized slots, dpdk.staging_rx_slots of them.
  Result<std::unique_ptr<StagingPool>> make_rx_pool();
  /// Transport::abort: each endpoint tells its peer (FIN) and fails.
  static void fail_aborted(DpdkEndpoint* ep, const Status& st);

  // --- used by DpdkEndpoint and the data path ---
  Result<size_t> progress(std::span<Completion> out);
  /// Polls until a completion or `timeout_ms`: yielding the CPU between polls while frames
  /// flow or sent data awaits its ack, sleeping with back-off when idle.
  Result<size_t> idle_wait(std::span<Completion> out, int timeout_ms);
  const Options& opts() const { return opts_; }
  void endpoint_gone(DpdkEndpoint* ep);
  /// A header mbuf with Ethernet/IPv4/UDP/gradwire headers for `ep`, payload to follow.
  rte_mbuf* alloc_frame(const DpdkEndpoint& ep, PktType type, WireHdr** hdr);
  /// Finish (lengths, checksums) and queue a frame built by alloc_frame, on link `link`.
  void send_frame(const DpdkEndpoint& ep, rte_mbuf* m, uint8_t link = 0);
  /// Ports this transport drives (dpdk.ifaces; 1 otherwise).
  int links() const { return 1 + static_cast<int>(extra_.size()); }
  const rte_ether_addr& link_mac(uint8_t link) const;
  void flush_tx();
  /// Hands `n` frames to a device queue, retrying while it takes some; drops the rest.
  void burst_out(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t n);
  rte_mempool* tx_pool() const { return port_->tx_pool(); }
  bool link_up() const { return port_->link_up(); }
  uint64_t now() const { return now_; }
  /// The window this receiver grants each peer that sends to it (dpdk_credit.h).
  uint32_t rx_grant() const { return credit_.grant(); }

  // --- device-memory staging (dpdk_staging.cc) ---
  /// A staging pool for `owner` (logs the path once per transport). @return NotSupported.
  Result<std::unique_ptr<StagingPool>> make_pool(const std::string& owner,
                                                 const StagingPool::Options& o);
  /// An endpoint failed or is gone: its copies in flight finish (drained) without it.
  void forget_rx_copies(DpdkEndpoint* ep);

  using Counters = DpdkCounters;

 private:
  friend class DpdkEndpoint;
  // State the endpoints and the data path share (friends: the same driver's classes).
  int held_ = 0;                 // out-of-order packets held by all endpoints
  RxCredit credit_;              // the incast budget shared among the peers sending here
  bool peer_left_open_ = false;  // an endpoint closed while its peer had not
  Counters counters_;
  std::shared_ptr<spdlog::logger> log_;

  DpdkTransport() = default;
  Status init(const Config& cfg);
  // init's steps, in order: window and pools (before the port opens), then MAC, IP and MTU;
  // zero copy, checksums and fault injection; the address and properties; the tables.
  Status init_window(int64_t window, PortOptions* po);
  Status init_identity(const std::string& ip_opt, std::string* ip);
  void init_features(const Choices& ch);
  Status init_address();
  Status init_state();
  void rx_burst();
  void handle_frame(rte_mbuf* m, uint8_t link = 0);
  uint64_t* check_outer(rte_mbuf* m, uint8_t link, uint32_t* udp_len);
  void dispatch(DpdkEndpoint* ep, const WireHdr& h, rte_mbuf* m, uint8_t link);
  // dpdk.ifaces (dpdk_links.cc): the ports after the first, named <kind><k><args>;iface=...
  Status open_links(const PortOptions& po, const std::string& kind, const std::string& args,
                    const std::vector<std::string>& ifaces);
  void rx_links();
  void queue_on_link(const DpdkEndpoint& ep, rte_mbuf* m, uint8_t link);
  void flush_links();
  void free_links();
  // connect's steps (dpdk_connect.cc).
  Result<PeerAddr> peer_of(const ConnectParams& p, const std::string& who);
  std::unique_ptr<DpdkEndpoint> new_endpoint(const ConnectParams& p, const PeerAddr& peer,
                                             const std::string& remote);
  Result<ParkedSyn> await_syn(const ConnectParams& p, const std::string& who,
                              const std::string& remote, Deadline deadline);
  /// `pay`: the SYN's h.seg_len bytes of authentication (wire version 4).
  void handle_syn(const WireHdr& h, const uint8_t* frame, const uint8_t* pay);
  void timers();
  DpdkEndpoint* lookup(uint32_t conn) const;
  /// memif, once per transport: waits (up to 2 s, within `deadline`) for the link and maps the
  /// shared regions' pages now rather than on the first pass of traffic (dpdk_memory.cc).
  void prefault_shared(const Deadline& deadline);

  Options opts_;
  auth::KeyPtr key_;             // the job's key (null: none), read once at init
  std::unique_ptr<Port> port_;   // destroyed last: mbufs everywhere else come from its pools
  std::vector<LinkPort> extra_;  // links 1.. (dpdk.ifaces); their frames come from port_'s pool
  rte_ether_addr mac_{};
  struct ConnSlot {
    DpdkEndpoint* ep = nullptr;
    uint16_t gen = 0;
  };
  std::vector<ConnSlot> conns_;
  std::vector<int> free_conns_;
  std::map<uint64_t, ParkedSyn> parked_;
  uint64_t now_ = 0, last_timers_ = 0, last_frame_rx_ = 0;
  int event_fd_ = -1;
  bool prefaulted_ = false;
  FaultInjector rx_fault_;
  // One per transmit queue: a frame held back for reordering leaves on its own queue (on a
  // ring bus the queue is the destination).
  std::vector<FaultInjector> tx_fault_;
  std::vector<rte_mbuf*> rx_pkts_, rx_faulted_;
  std::vector<std::vector<rte_mbuf*>> txq_;  // per transmit queue
  std::vector<rte_mbuf*> tx_faulted_;
  bool staging_logged_ = false;
};

}  // namespace gw::drv::dpdk
