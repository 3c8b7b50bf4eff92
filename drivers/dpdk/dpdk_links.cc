// Several links per transport (dpdk_links.h): the ports after the first, their receive and
// transmit, and each connection's routing, take-out and probing of links.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_links.h"

#include <arpa/inet.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dpdk_endpoint.h"
#include "dpdk_memif.h"
#include "log.h"

namespace gw::drv::dpdk {

Status DpdkTransport::open_links(const PortOptions& po, const std::string& kind,
                                 const std::string& args, const std::vector<std::string>& ifaces) {
  for (size_t k = 1; k < ifaces.size(); ++k) {
    PortOptions o = po;
    o.tx_mbufs = 1023;  // its frames are built from link 0's pool (alloc_frame)
    o.vdev = vdev_with_defaults(kind + std::to_string(k) + args + ";iface=" + ifaces[k], &o.mtu);
    GW_RETURN_IF_ERROR(check_xdp_prog(o.vdev, ntohs(opts_.udp_port)));
    LinkPort l;
    GW_ASSIGN_OR_RETURN(l.port, Port::open(o));
    if (l.port->mtu() != port_->mtu()) {
      return Status(Code::kInvalidArgument, "dpdk.ifaces: " + ifaces[k] + " has MTU " +
                                                std::to_string(l.port->mtu()) + " and " +
                                                ifaces[0] + " " + std::to_string(port_->mtu()) +
                                                "; give every link the same MTU (or set dpdk.mtu)");
    }
    l.mac = l.port->mac();
    l.txq.reserve(64);
    extra_.push_back(std::move(l));
  }
  log_->info(
      "dpdk: {} links ({}): packets sprayed over them; one taken out after {} ms "
      "without acks, probed every {} ms",
      links(),
      [&] {
        std::string s;
        for (const auto& i : ifaces) s += (s.empty() ? "" : ", ") + i;
        return s;
      }(),
      opts_.link_timeout_ns / 1'000'000, opts_.link_probe_ns / 1'000'000);
  return Status();
}

void DpdkTransport::rx_links() {
  for (size_t i = 0; i < extra_.size(); ++i) {
    const uint16_t n = rte_eth_rx_burst(extra_[i].port->id(), 0, rx_pkts_.data(), 32);
    if (n == 0) continue;
    last_frame_rx_ = now_;
    for (uint16_t j = 0; j < n; ++j) handle_frame(rx_pkts_[j], static_cast<uint8_t>(i + 1));
  }
}

const rte_ether_addr& DpdkTransport::link_mac(uint8_t link) const {
  return link == 0 ? mac_ : extra_[link - 1].mac;
}

void DpdkTransport::queue_on_link(const DpdkEndpoint& ep, rte_mbuf* m, uint8_t link) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  eth->dst_addr = ep.peer().macs[link];
  eth->src_addr = extra_[link - 1].mac;
  auto& q = extra_[link - 1].txq;
  q.push_back(m);
  if (q.size() >= 32) flush_links();
}

void DpdkTransport::flush_links() {
  for (LinkPort& l : extra_) {
    if (l.txq.empty()) continue;
    burst_out(l.port->id(), 0, l.txq.data(), static_cast<uint16_t>(l.txq.size()));
    l.txq.clear();
  }
}

void DpdkTransport::free_links() {
  for (LinkPort& l : extra_) {
    rte_pktmbuf_free_bulk(l.txq.data(), static_cast<unsigned>(l.txq.size()));
    l.txq.clear();
  }
}

// --- one connection ---

uint8_t DpdkEndpoint::route(ep_state::TxPkt& p) {
  if (p.on_link) links_.left(p.link, false);
  p.link = links_.pick();
  p.on_link = true;
  links_.sent(p.link, t_->now());
  return p.link;
}

void DpdkEndpoint::send_probe(uint8_t link, bool answer) {
  WireHdr* h;
  rte_mbuf* m = t_->alloc_frame(*this, PktType::kProbe, &h);
  if (!m) return;
  h->offset = link;
  h->msg_len = answer;
  t_->send_frame(*this, m, link);
}

void DpdkEndpoint::on_probe(const WireHdr& h, uint8_t link) {
  if (link >= links_.n() || h.offset != link) return;
  if (h.msg_len == 0) return send_probe(link, true);
  if (!links_.dead(link)) return;
  links_.set_live(link);
  ++t_->counters_.links_up;
  t_->log_->info("dpdk: link {} to {} ({}) carries again (a probe came back)", link, peer_name_,
                 remote_);
}

void DpdkEndpoint::check_links(uint64_t now) {
  const auto& o = t_->opts();
  if (const int k = links_.overdue(now, o.link_timeout_ns); k >= 0) {
    links_.set_dead(k, now);
    ++t_->counters_.links_down;
    t_->log_->warn(
        "dpdk: link {} to {} ({}) taken out: none of its packets acknowledged for "
        "{} ms; its {} packets in flight go again on the others",
        k, peer_name_, remote_, o.link_timeout_ns / 1'000'000, links_.inflight(k));
  }
  // What a dead link holds goes again on the live ones (bounded per pass by the mbufs).
  for (int k = 0; k < links_.n(); ++k) {
    if (!links_.dead(k) || links_.inflight(k) == 0) continue;
    uint32_t found = 0;
    for (uint32_t s = snd_una_; s != snd_nxt_; ++s) {
      TxPkt& p = inflight_[s & mask_];
      if (!p.on_link || p.link != k || p.sacked) continue;
      ++found;
      if (!transmit(s)) break;
      ++t_->counters_.link_resent;
    }
    if (found == 0) links_.clear(k);
  }
  for (int k; (k = links_.probe_due(now, o.link_probe_ns)) >= 0;) {
    ++t_->counters_.link_probes;
    send_probe(static_cast<uint8_t>(k), false);
  }
}

}  // namespace gw::drv::dpdk
