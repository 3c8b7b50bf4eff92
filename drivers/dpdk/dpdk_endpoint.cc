// DpdkEndpoint: set-up, teardown and posting of requests (its handshake: dpdk_connect.cc).
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include "dpdk_endpoint.h"

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "log.h"

namespace gw::drv::dpdk {

static_assert(kSynHello == auth::kClientHello && kSynProof == auth::kMac &&
              kSynAckHello == auth::kServerHello && kSynAckVerdict == auth::kVerdict);

DpdkEndpoint::DpdkEndpoint(DpdkTransport* t, const ConnectParams& p, uint32_t conn,
                           const PeerAddr& peer, const std::string& remote)
    : t_(t), peer_(peer), remote_(remote), conn_(conn) {
  peer_id_ = p.peer_id;
  peer_name_ = p.peer_name.empty() ? remote_ : p.peer_name;
  const auto& o = t->opts();
  win_ = static_cast<uint32_t>(o.window);
  rwin_ = kRecvWindows * win_;
  mask_ = rwin_ - 1;
  sends_.init(static_cast<size_t>(o.max_outstanding));
  inflight_.resize(rwin_);
  rx_.resize(rwin_);
  rx_bits_.assign(rwin_ / 64, 0);  // windows are powers of two >= 64
  msg_map_.assign(rwin_, -1);
  core_.init(&t->core(), this, static_cast<size_t>(o.max_outstanding), rwin_, this);
  rto_ = std::max<uint64_t>(o.rto_min_ns, 10'000'000);  // until the first RTT sample
  links_.init(peer_.links);

  // Ethernet / IPv4 / UDP template; lengths and checksums are filled per frame.
  auto* eth = reinterpret_cast<rte_ether_hdr*>(hdr_template_);
  eth->dst_addr = peer_.mac;
  eth->src_addr = t->mac_;
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(hdr_template_ + kEthLen);
  ip->version_ihl = 0x45;
  ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = o.ip;
  ip->dst_addr = peer_.ip;
  auto* udp = reinterpret_cast<rte_udp_hdr*>(hdr_template_ + kEthLen + kIpLen);
  udp->src_port = o.udp_port;
  udp->dst_port = peer_.port;
  last_rx_ = last_tx_ = t->now();
}

void DpdkEndpoint::send_control(PktType type, int link) {
  WireHdr* h;
  rte_mbuf* m = t_->alloc_frame(*this, type, &h);
  if (!m) return;
  if (type == PktType::kSyn || type == PktType::kSynAck) {
    h->tag = key_;
    h->wnd = static_cast<uint32_t>(t_->opts().window);
    if (char* d = rte_pktmbuf_append(m, auth_.len)) {
      std::memcpy(d, auth_.out, auth_.len);
      h->seg_len = auth_.len;
    }
  } else if (type == PktType::kAck) {
    uint64_t ext[kMaxSackWords];
    if (uint32_t n = fill_ack(h, ext); n > 0) {
      char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(n * 8));
      if (d) {
        std::memcpy(d, ext, n * 8);
        h->seg_len = static_cast<uint16_t>(n * 8);
      }
    }
  } else {
    fill_ack(h, nullptr);
  }
  last_tx_ = t_->now();
  t_->send_frame(*this, m, link >= 0 ? static_cast<uint8_t>(link) : links_.control(rx_link_));
}

DpdkEndpoint::~DpdkEndpoint() {
  // Tell the peer, so it fails its pending requests now rather than after its timeout. Not
  // once the link is down: memif's transmit into a peer that just left can touch memory its
  // control thread is unmapping (seen as a crash in rte_eth_tx_burst, 4 in 25 runs).
  if (connected_ && !failed() && t_->link_up()) {
    send_control(PktType::kFin);
    send_control(PktType::kFin);
    t_->flush_tx();
    t_->peer_left_open_ = true;
  }
  for (auto& s : rx_) {
    if (s.m) {
      rte_pktmbuf_free(s.m);
      --t_->held_;
    }
  }
  t_->endpoint_gone(this);  // core_ drops pending requests and buffered messages
}

void DpdkEndpoint::abort(const Status& st) {
  if (connected_ && !failed() && t_->link_up()) {
    send_control(PktType::kFin);
    send_control(PktType::kFin);
  }
  fail(st);
}

Result<size_t> DpdkEndpoint::post_send(std::span<const SendRequest> reqs) {
  if (const Status& no = core_.refusal(); !no.ok()) [[unlikely]]
    return no;
  size_t n = 0;
  for (; n < reqs.size(); ++n) {
    if (Status st = core::check_send("dpdk", peer_name_, reqs[n], t_->opts().max_message);
        !st.ok()) {
      if (n == 0) return st;
      break;
    }
    const bool dev = reqs[n].len > 0 && t_->is_device(reqs[n].buf, reqs[n].mr);
    if (dev) {
      if (Status st = ensure_tx_pool(); !st.ok()) {
        if (n == 0) return st;
        break;
      }
    }
    if (sends_.full() || !core_.reserve()) break;
    sends_.push(SendSlot{reqs[n], 0, false, dev});
  }
  pump();
  t_->flush_tx();
  return n;
}

Result<size_t> DpdkEndpoint::post_recv(std::span<const RecvRequest> reqs) {
  for (const RecvRequest& r : reqs) {  // the receive pool, made before the first device receive
    if (r.len > 0 && t_->is_device(r.buf, r.mr)) {
      GW_RETURN_IF_ERROR(t_->rx_pool().status());
      break;
    }
  }
  auto n = core_.post_recv(
      reqs, [this](const RecvRequest& r) { return core::check_recv("dpdk", peer_name_, r); });
  if (stalled_) advance();
  return n;
}

void DpdkEndpoint::fail(const Status& st, bool quiet_close) {
  if (!core_.set_error(st, quiet_close, !sends_.empty())) return;
  const Code code = st.code();
  while (!sends_.empty()) {
    core_.complete(sends_.front().req.wr_id, sends_.front().req.tag, 0, Op::kSend, code);
    sends_.pop();
  }
  seg_idx_ = 0;
  drop_staging();
  // A peer that closed in order leaves what arrived whole receivable (as tcp and rdma).
  core_.fail_receives(code, [&](int m) {
    const core::InMsg& im = core_.msg(m);
    return quiet_close && im.dest == core::Dest::kUnexpected && im.complete && !im.claimed;
  });
  for (auto& s : rx_) {
    if (s.m) {
      rte_pktmbuf_free(s.m);
      --t_->held_;
    }
    s = RxSlot{};
  }
  std::fill(rx_bits_.begin(), rx_bits_.end(), 0);
  core_.report_error();
}

}  // namespace gw::drv::dpdk
