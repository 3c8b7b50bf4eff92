// Transport hot path: the progress loop, frame checks and demultiplexing on receive, frame
// building and batched transmission. No allocation, no logging above trace.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <sched.h>

#include <cstring>
#include <thread>

#include "dpdk_cksum.h"
#include "dpdk_endpoint.h"
#include "log.h"

namespace gw::drv::dpdk {
namespace {
constexpr uint16_t kBurst = 32;
constexpr uint64_t kTimerPeriodNs = 100'000;  // retransmission/heartbeat checks
constexpr uint64_t kBusyNs = 2'000'000;       // traffic this recent keeps idle_wait polling
}  // namespace

Result<size_t> DpdkTransport::progress(std::span<Completion> out) {
  now_ = now_ns();
  if (!rx_copies_.empty()) poll_rx_copies();
  rx_burst();
  for (DpdkEndpoint* ep : eps_) {
    if (ep->failed()) continue;
    if (ep->stalled()) ep->advance();
    ep->pump();
    if (ep->need_ack()) ep->send_ack();
  }
  if (now_ - last_timers_ >= kTimerPeriodNs) {
    last_timers_ = now_;
    timers();
  }
  finish_pass();
  flush_tx();
  return core_.sink().drain(out);
}

// Sleeping while a transfer is under way costs a whole sleep per window (the peer's acks or
// next packets wait in the ring); spinning starves a peer that shares the core. So: yield
// between polls while frames arrived recently or sent data awaits its ack, sleep otherwise.
Result<size_t> DpdkTransport::idle_wait(std::span<Completion> out, int timeout_ms) {
  const uint64_t end = now_ns() + static_cast<uint64_t>(std::max(0, timeout_ms)) * 1'000'000;
  uint64_t backoff = 1000;
  for (;;) {
    GW_ASSIGN_OR_RETURN(size_t n, progress(out));
    if (n > 0 || now_ >= end) return n;
    bool busy = now_ - last_frame_rx_ < kBusyNs;
    for (size_t i = 0; !busy && i < eps_.size(); ++i) busy = eps_[i]->awaiting_ack(now_);
    if (busy) {
      sched_yield();
      backoff = 1000;
      continue;
    }
    std::this_thread::sleep_for(Nanos(std::min(backoff, end - now_)));
    backoff = std::min<uint64_t>(backoff * 2, 1'000'000);
  }
}

void DpdkTransport::timers() {
  if (rte_mbuf* m = rx_fault_.take_held()) handle_frame(m);
  for (size_t q = 0; q < tx_fault_.size(); ++q)
    if (rte_mbuf* m = tx_fault_[q].take_held()) txq_[q].push_back(m);
  // Endpoints may fail (and a failure may not remove them) while iterating.
  uint32_t sending = 0;
  for (size_t i = 0; i < eps_.size(); ++i) {
    eps_[i]->timers(now_);
    sending += now_ - eps_[i]->last_data() < RxCredit::kActiveNs;
  }
  credit_.tick(now_, sending, counters_.out_of_order);
}

void DpdkTransport::rx_burst() {
  if (!extra_.empty()) rx_links();
  uint16_t n = rte_eth_rx_burst(port_->id(), 0, rx_pkts_.data(), kBurst);
  if (n == 0) return;
  last_frame_rx_ = now_;
  rte_mbuf** pkts = rx_pkts_.data();
  if (rx_fault_.active()) {
    n = rx_fault_.apply(pkts, n, rx_faulted_.data(), port_->tx_pool());
    pkts = rx_faulted_.data();
  }
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    handle_frame(pkts[i]);
  }
}

namespace {
// The records of a kBatch packet lie inside its payload and cover it exactly.
bool batch_ok(const rte_mbuf* m, const WireHdr& h, uint64_t max_msg) {
  uint32_t off = 0;
  for (uint64_t i = 0; i < h.msg_len; ++i) {
    BatchRec r;
    if (h.seg_len - off < sizeof r) return false;
    const void* p = rte_pktmbuf_read(m, static_cast<uint32_t>(kHdrsLen + off), sizeof r, &r);
    if (p != &r) std::memcpy(&r, p, sizeof r);
    off += sizeof r;
    if (r.len > h.seg_len - off || r.len > max_msg) return false;
    off += r.len;
  }
  return off == h.seg_len;
}
}  // namespace

constexpr auto kPayOff = static_cast<uint32_t>(kHdrsLen);

// Checks one frame and hands it to its endpoint; frees it unless the endpoint keeps it.
// handle_frame's steps, one call site each: inlined, so the frame path stays one function.
// Ethernet / IPv4 / UDP checks; trims Ethernet padding. @return the counter a dropped frame
// counts in, or null: the frame is for us, its UDP length in *udp_len.
[[gnu::always_inline]] inline uint64_t* DpdkTransport::check_outer(rte_mbuf* m, uint8_t link,
                                                                   uint32_t* udp_len) {
  if (m->pkt_len < kHdrsLen || m->data_len < kHdrsLen) return &counters_.bad_frames;
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(f);
  if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) return &counters_.not_for_us;
  if (!rte_is_same_ether_addr(&eth->dst_addr, link ? &extra_[link - 1].mac : &mac_) &&
      !rte_is_broadcast_ether_addr(&eth->dst_addr))
    return &counters_.not_for_us;
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(f + kEthLen);
  if (ip->version_ihl != 0x45 || ip->next_proto_id != IPPROTO_UDP) return &counters_.not_for_us;
  if (ip->dst_addr != opts_.ip) return &counters_.not_for_us;
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(f + kEthLen + kIpLen);
  if (udp->dst_port != opts_.udp_port) return &counters_.not_for_us;
  const uint32_t ip_len = rte_be_to_cpu_16(ip->total_length);
  *udp_len = rte_be_to_cpu_16(udp->dgram_len);
  if (ip_len + kEthLen > m->pkt_len || *udp_len + kIpLen != ip_len ||
      *udp_len < kUdpLen + sizeof(WireHdr) ||
      (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_OFFSET_MASK | RTE_IPV4_HDR_MF_FLAG)))
    return &counters_.bad_frames;
  if (rte_ipv4_cksum(ip) != 0) return &counters_.bad_checksum;
  // Ethernet padding of short frames is not part of the datagram.
  if (m->pkt_len > ip_len + kEthLen)
    rte_pktmbuf_trim(m, static_cast<uint16_t>(m->pkt_len - ip_len - kEthLen));
  if (udp->dgram_cksum != 0 && !udp_cksum_ok(m, ip, kEthLen + kIpLen))
    return &counters_.bad_checksum;
  return nullptr;
}

// A checked packet of `ep`'s (not a SYN) to its endpoint; frees m unless on_data took it.
[[gnu::always_inline]] inline void DpdkTransport::dispatch(DpdkEndpoint* ep, const WireHdr& h,
                                                           rte_mbuf* m, uint8_t link) {
  switch (static_cast<PktType>(h.type)) {
    case PktType::kData:
    case PktType::kBatch:
      ep->on_data(h, m, static_cast<uint32_t>(kHdrsLen));
      return;
    case PktType::kAck: {
      uint64_t ext[kMaxSackWords];  // more selective-ack words (checked: whole, at most 63)
      const uint32_t n = h.seg_len / 8;
      if (n > 0) {
        const void* p = rte_pktmbuf_read(m, static_cast<uint32_t>(kHdrsLen), h.seg_len, ext);
        if (p != ext) std::memcpy(ext, p, h.seg_len);
      }
      ep->on_ack(h, ext, n);
      break;
    }
    case PktType::kSynAck: {
      uint8_t buf[kSynAckHello];
      ep->on_synack(h, static_cast<const uint8_t*>(rte_pktmbuf_read(m, kPayOff, h.seg_len, buf)));
      break;
    }
    case PktType::kFin:
      ep->on_fin(h);
      break;
    case PktType::kProbe:
      ep->on_probe(h, link);
      break;
    case PktType::kSyn:
      break;
  }
  rte_pktmbuf_free(m);
}

void DpdkTransport::handle_frame(rte_mbuf* m, uint8_t link) {
  ++counters_.pkts_received;
  auto drop = [&](uint64_t& counter) {
    ++counter;
    rte_pktmbuf_free(m);
  };
  uint32_t udp_len = 0;
  if (uint64_t* bad = check_outer(m, link, &udp_len)) return drop(*bad);
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(f + kEthLen);
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(f + kEthLen + kIpLen);
  WireHdr h;
  std::memcpy(&h, f + kEthLen + kIpLen + kUdpLen, sizeof h);
  const uint32_t payload = udp_len - static_cast<uint32_t>(kUdpLen + sizeof(WireHdr));
  if (check_wire(h, payload, opts_.max_message)) return drop(counters_.bad_header);
  if (h.type == static_cast<uint8_t>(PktType::kBatch) && !batch_ok(m, h, opts_.max_message))
    return drop(counters_.bad_header);
  if (h.type == static_cast<uint8_t>(PktType::kSyn)) {
    uint8_t buf[kSynHello];  // the SYN's authentication (its length checked by check_wire)
    handle_syn(h, f, static_cast<const uint8_t*>(rte_pktmbuf_read(m, kPayOff, h.seg_len, buf)));
    return rte_pktmbuf_free(m);
  }
  DpdkEndpoint* ep = lookup(h.dst_conn);
  if (!ep || ep->failed() || !ep->from_peer(ip->src_addr, udp->src_port, h.src_conn))
    return drop(counters_.unknown_conn);
  ep->last_rx_ = now_;
  ep->rx_on(link);
  dispatch(ep, h, m, link);
}

rte_mbuf* DpdkTransport::alloc_frame(const DpdkEndpoint& ep, PktType type, WireHdr** hdr) {
  rte_mbuf* m = rte_pktmbuf_alloc(port_->tx_pool());
  if (!m) {
    ++counters_.tx_alloc_fail;
    return nullptr;
  }
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kHdrsLen));
  if (!p) {  // data room smaller than the headers: a misconfigured pool
    rte_pktmbuf_free(m);
    ++counters_.tx_alloc_fail;
    return nullptr;
  }
  WireHdr w{};
  w.magic = kMagic;
  w.version = kVersion;
  w.type = static_cast<uint8_t>(type);
  w.dst_conn = ep.remote_conn();
  w.src_conn = ep.conn();
  std::memcpy(p, ep.hdr_template_, sizeof ep.hdr_template_);
  std::memcpy(p + sizeof ep.hdr_template_, &w, sizeof w);
  *hdr = reinterpret_cast<WireHdr*>(p + sizeof ep.hdr_template_);
  return m;
}

void DpdkTransport::send_frame(const DpdkEndpoint& ep, rte_mbuf* m, uint8_t link) {
  auto* f = rte_pktmbuf_mtod(m, uint8_t*);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f + kEthLen);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(f + kEthLen + kIpLen);
  const uint32_t l3 = m->pkt_len - static_cast<uint32_t>(kEthLen);
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(l3));
  ip->hdr_checksum = 0;
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(l3 - kIpLen));
  udp->dgram_cksum = 0;
  if (opts_.checksum) udp->dgram_cksum = udp_cksum(m, ip, kEthLen + kIpLen);
  ++counters_.pkts_sent;
  if (link != 0) [[unlikely]]
    return queue_on_link(ep, m, link);
  auto& q = txq_[ep.peer().txq];
  q.push_back(m);
  if (q.size() >= kBurst) flush_tx();
}

void DpdkTransport::burst_out(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t n) {
  uint16_t sent = 0;
  for (int tries = 0; sent < n && tries < 64; ++tries)
    sent = static_cast<uint16_t>(
        sent + rte_eth_tx_burst(port, queue, pkts + sent, static_cast<uint16_t>(n - sent)));
  if (sent < n) {
    // The device queue stays full (or down): drop (the reliability layer retransmits).
    counters_.tx_ring_full += n - sent;
    rte_pktmbuf_free_bulk(pkts + sent, n - sent);
  }
}

void DpdkTransport::flush_tx() {
  for (size_t qi = 0; qi < txq_.size(); ++qi) {
    auto& q = txq_[qi];
    if (q.empty()) continue;
    rte_mbuf** pkts = q.data();
    uint16_t n = static_cast<uint16_t>(q.size());
    if (tx_fault_[qi].active()) {
      n = tx_fault_[qi].apply(pkts, n, tx_faulted_.data(), port_->tx_pool());
      pkts = tx_faulted_.data();
    }
    burst_out(port_->id(), static_cast<uint16_t>(qi), pkts, n);
    q.clear();
  }
  if (!extra_.empty()) flush_links();
}

}  // namespace gw::drv::dpdk
