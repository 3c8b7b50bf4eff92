// DpdkEndpoint hot path, send side: segmentation and batching, (re)transmission, acks and
// selective acks, the window, timers. No allocation, no logging above trace.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_mbuf.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "dpdk_endpoint.h"
#include "log.h"

namespace gw::drv::dpdk {
namespace {

constexpr int kMaxBackoff = 16;
constexpr uint32_t kRetxBurst = 16;  // packets resent when the retransmission timer fires
constexpr uint64_t kFastAgainSlackNs = 100'000;
constexpr uint32_t kMinLossWindow = 256;
// Messages up to kBatchMsgMax bytes queued together leave as one kBatch packet: a packet per
// 64-byte message bounded the message rate (framing, checksums, acks and mbufs per message).
constexpr uint64_t kBatchMsgMax = 256;
constexpr uint32_t kMaxBatch = 64;

void no_free(void*, void*) {}  // the caller owns the memory; the send completes on its ack

}  // namespace

// 64 bits of rx_bits_ from packet `seq` on (the bitmap is circular, a power of two words).
uint64_t DpdkEndpoint::held_bits(uint32_t seq) const {
  const uint32_t p = seq & mask_, w = p >> 6, sh = p & 63;
  uint64_t v = rx_bits_[w] >> sh;
  if (sh) v |= rx_bits_[(w + 1) & (rx_bits_.size() - 1)] << (64 - sh);
  return v;
}

// The header's sack word, plus in `ext` (acks only) the words that reach the highest packet
// received: with the first 64 packets alone, holes further into a large window were found one
// round trip at a time. A data packet cannot carry them: then a pure ack follows.
uint32_t DpdkEndpoint::fill_ack(WireHdr* h, uint64_t* ext) {
  h->ack = rcv_nxt_;
  h->wnd = t_->rx_grant();  // this receiver's share for the peer (dpdk_credit.h)
  const uint32_t span = std::min<uint32_t>(
      rwin_, static_cast<uint32_t>(std::max<int32_t>(0, seq_diff(rx_high_, rcv_nxt_))));
  const uint32_t words = (span + 63) / 64;  // in order (the usual case): none
  h->sack = words ? held_bits(rcv_nxt_) : 0;
  need_ack_ = false;
  if (words <= 1) return 0;
  if (!ext) {
    need_ack_ = true;
    return 0;
  }
  const uint32_t n = std::min({words - 1, kMaxSackWords, t_->opts().seg_payload / 8});
  for (uint32_t j = 0; j < n; ++j) ext[j] = held_bits(rcv_nxt_ + 64 * (j + 1));
  return n;
}

void DpdkEndpoint::send_ack() {
  ++t_->counters_.acks_sent;
  send_control(PktType::kAck);
}

// --- send side ---

void DpdkEndpoint::pump() {
  if (!connected_ || failed()) return;
  const uint32_t seg = t_->opts().seg_payload;
  const uint32_t limit = std::min({cwnd_, win_, grant_}) + sacked_;
  while (seg_idx_ < sends_.size() &&
         static_cast<uint32_t>(seq_diff(snd_nxt_, snd_una_)) < std::min(limit, rwin_)) {
    if (seg_off_ == 0) {
      const int b = pump_batch();
      if (b < 0) return;  // out of mbufs
      if (b > 0) continue;
    }
    SendSlot& s = sends_.at(seg_idx_);
    TxPkt& p = inflight_[snd_nxt_ & mask_];
    uint64_t room = s.req.len - seg_off_;
    p.data = static_cast<const uint8_t*>(s.req.buf) + (s.req.buf ? seg_off_ : 0);
    if (s.dev && !tx_staged(s.req, &p.data, &room)) return;  // its window is not staged yet
    p.len = static_cast<uint16_t>(std::min<uint64_t>(seg, room));
    p.tag = s.req.tag;
    p.msg_len = s.req.len;
    p.offset = seg_off_;
    p.msg_id = msg_tx_;
    p.batch = 0;
    p.tries = 0;
    p.sacked = p.fast = p.on_link = false;
    if (!transmit(snd_nxt_)) return;  // out of mbufs: try again on the next poll
    if (s.dev && p.len == room) tx_window_sent(snd_nxt_);
    seg_off_ += p.len;
    ++snd_nxt_;
    if (seg_off_ == s.req.len) {
      s.last_seq = snd_nxt_ - 1;
      s.segmented = true;
      ++seg_idx_;
      ++msg_tx_;
      seg_off_ = 0;
    }
  }
}

// Two or more small messages at the head of the queue: one kBatch packet.
// @return 1 sent, 0 not applicable, -1 out of mbufs.
int DpdkEndpoint::pump_batch() {
  const uint32_t room = t_->opts().seg_payload;
  uint32_t n = 0, bytes = 0;
  while (seg_idx_ + n < sends_.size() && n < kMaxBatch) {
    const SendSlot& s = sends_.at(seg_idx_ + n);
    const uint64_t len = s.req.len;
    if (len > kBatchMsgMax || s.dev || bytes + sizeof(BatchRec) + len > room) break;
    bytes += static_cast<uint32_t>(sizeof(BatchRec) + len);
    ++n;
  }
  if (n < 2) return 0;
  TxPkt& p = inflight_[snd_nxt_ & mask_];
  p = TxPkt{};
  p.len = static_cast<uint16_t>(bytes);
  p.batch = static_cast<uint16_t>(n);
  p.msg_len = n;
  p.msg_id = msg_tx_;
  if (!transmit(snd_nxt_)) return -1;
  ++t_->counters_.batch_pkts;
  for (uint32_t i = 0; i < n; ++i) {
    SendSlot& s = sends_.at(seg_idx_++);
    s.last_seq = snd_nxt_;
    s.segmented = true;
    ++msg_tx_;
  }
  ++snd_nxt_;
  return 1;
}

// transmit's payloads, one call site each (inlined: transmit stays one function). Each
// @return false when an mbuf is missing: m is freed and the failure counted.
// A batch, rebuilt from the sends on every (re)transmission: they complete only once acked.
[[gnu::always_inline]] inline bool DpdkEndpoint::append_batch(const TxPkt& p, rte_mbuf* m) {
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, p.len));
  if (!d) {
    rte_pktmbuf_free(m);
    ++t_->counters_.tx_alloc_fail;
    return false;
  }
  for (uint32_t i = 0, first = p.msg_id - msg_una_; i < p.batch; ++i) {
    const SendRequest& r = sends_.at(first + i).req;
    const BatchRec rec{r.tag, static_cast<uint32_t>(r.len), 0};
    std::memcpy(d, &rec, sizeof rec);
    if (r.len) std::memcpy(d + sizeof rec, r.buf, r.len);
    d += sizeof rec + r.len;
  }
  ++t_->counters_.copied_pkts;
  return true;
}

// The payload stays in the caller's memory: a second mbuf points at it, with its
// shared-info block in that mbuf's own (unused) data room so it lives as long as the mbuf.
[[gnu::always_inline]] inline bool DpdkEndpoint::attach_payload(const TxPkt& p, rte_mbuf* m) {
  rte_mbuf* ext = rte_pktmbuf_alloc(t_->tx_pool());
  if (!ext) {
    ++t_->counters_.tx_alloc_fail;
    rte_pktmbuf_free(m);
    return false;
  }
  auto* shinfo = reinterpret_cast<rte_mbuf_ext_shared_info*>(ext->buf_addr);
  shinfo->free_cb = no_free;
  shinfo->fcb_opaque = nullptr;
  rte_mbuf_ext_refcnt_set(shinfo, 1);
  void* data = const_cast<uint8_t*>(p.data);
  rte_pktmbuf_attach_extbuf(ext, data, reinterpret_cast<uintptr_t>(data), p.len, shinfo);
  ext->data_off = 0;
  ext->data_len = p.len;
  ext->pkt_len = p.len;
  m->next = ext;
  m->nb_segs = 2;
  m->pkt_len += p.len;
  ++t_->counters_.zero_copy_pkts;
  return true;
}

bool DpdkEndpoint::transmit(uint32_t seq) {
  TxPkt& p = inflight_[seq & mask_];
  WireHdr* h;
  rte_mbuf* m = t_->alloc_frame(*this, p.batch ? PktType::kBatch : PktType::kData, &h);
  if (!m) return false;
  h->seg_len = p.len;
  h->seq = seq;
  h->msg_id = p.msg_id;
  h->tag = p.tag;
  h->msg_len = p.msg_len;
  h->offset = p.offset;
  fill_ack(h, nullptr);
  const auto& o = t_->opts();
  if (p.batch) {
    if (!append_batch(p, m)) return false;
  } else if (o.zero_copy && p.len >= o.zero_copy_min) {
    if (!attach_payload(p, m)) return false;
  } else if (p.len > 0) {
    char* d = rte_pktmbuf_append(m, p.len);
    if (!d) {  // the mbuf is too small for this MTU
      rte_pktmbuf_free(m);
      ++t_->counters_.tx_alloc_fail;
      return false;
    }
    std::memcpy(d, p.data, p.len);
    ++t_->counters_.copied_pkts;
  }
  if (p.tries > 0) ++t_->counters_.retransmits;
  if (p.tries < 255) ++p.tries;
  p.sent = t_->now();
  last_tx_ = p.sent;
  t_->counters_.bytes_sent += p.len;
  t_->send_frame(*this, m, links_.many() ? route(p) : 0);
  return true;
}

void DpdkEndpoint::rtt_sample(uint64_t rtt) {
  if (srtt_ == 0) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
  } else {
    uint64_t err = rtt > srtt_ ? rtt - srtt_ : srtt_ - rtt;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * srtt_ + rtt) / 8;
  }
  const auto& o = t_->opts();
  rto_ = std::clamp<uint64_t>(srtt_ + 4 * rttvar_, o.rto_min_ns, o.rto_max_ns);
}

void DpdkEndpoint::on_ack(const WireHdr& h, const uint64_t* ext, uint32_t ext_words) {
  if (!connected_) {  // the SYN-ACK was lost, but the peer already talks to us
    remote_conn_ = h.src_conn;
    connected_ = true;
  }
  grant_ = std::max<uint32_t>(h.wnd, RxCredit::kMinGrant);  // the peer's share for us
  const int32_t adv = seq_diff(h.ack, snd_una_);
  if (adv > 0 && seq_diff(h.ack, snd_nxt_) <= 0) {
    // Karn: no sample when a retransmission is among the newly acknowledged packets. Its
    // ack also covers packets held behind the hole it filled, sent long before: their age is
    // the loss recovery, not the round trip (it drove the RTO to its 200 ms cap at 5 % loss).
    bool resent = false;
    for (uint32_t s = snd_una_; s != h.ack; ++s) {
      TxPkt& p = inflight_[s & mask_];
      resent |= p.tries > 1;
      sacked_ -= p.sacked;
      if (links_.many()) acked_on_link(p);
    }
    const TxPkt& last = inflight_[(h.ack - 1) & mask_];
    if (!resent) rtt_sample(t_->now() - last.sent);
    grow_window(static_cast<uint32_t>(adv));
    snd_una_ = h.ack;
    if (snd_una_ == snd_nxt_ && links_.many()) links_.idle(t_->now());
    backoff_ = 0;
    last_advance_ = t_->now();
    if (!tx_wins_.empty()) release_tx_windows();
    complete_sends();
  }
  // Selective acks: bit i of word j = packet ack + 64 j + i is held by the peer.
  if (h.sack == 0 && ext_words == 0) return;
  uint32_t highest = snd_una_;
  for (uint32_t j = 0; j <= ext_words; ++j) {
    for (uint64_t w = j ? ext[j - 1] : h.sack; w; w &= w - 1) {
      const uint32_t s = h.ack + 64 * j + static_cast<uint32_t>(std::countr_zero(w));
      if (seq_diff(s, snd_una_) < 0) continue;
      if (seq_diff(s, snd_nxt_) >= 0) break;
      TxPkt& p = inflight_[s & mask_];
      sacked_ += !p.sacked;
      if (!p.sacked && links_.many()) acked_on_link(p);
      p.sacked = true;
      highest = s;
    }
  }
  if (seq_diff(highest, high_sacked_) > 0 || seq_diff(high_sacked_, snd_una_) < 0)
    high_sacked_ = highest;
  fast_retransmit(highest);
}

// Fast retransmit: a hole with at least three held packets after it was lost, not late.
// A hole already resent this way is resent again once that copy had two round trips to
// be acknowledged (it was lost too), instead of waiting for the retransmission timer.
// Several links: packets of different links overtake each other, so only later packets of
// the hole's own link count (each link keeps its order).
void DpdkEndpoint::fast_retransmit(uint32_t highest) {
  const uint64_t now = t_->now(), again = 2 * srtt_ + kFastAgainSlackNs;
  const bool many = links_.many();
  int after = 0, on[kMaxLinks] = {};
  for (uint32_t s = highest; seq_diff(s, snd_una_) >= 0; --s) {
    TxPkt& p = inflight_[s & mask_];
    if (p.sacked) {
      ++after;
      on[p.link] += many;
    } else if ((many ? on[p.link] : after) >= 3 && (!p.fast || now - p.sent >= again)) {
      p.fast = true;
      ++t_->counters_.fast_retransmits;
      on_loss(s);
      if (!transmit(s)) break;
    }
    if (s == snd_una_) break;
  }
}

// Loss shrinks the window (halved once per round trip, down to kMinLossWindow) and loss-free
// acks grow it back by one packet per four acknowledged. Not congestion control: random loss
// costs less with a shorter queue at the receiver, since a retransmission waits behind it.
// Measured at 0.1 %, 1 % and 5 % loss, this beat keeping the window (halving on timeouts
// only) and a 7/8 decrease.
void DpdkEndpoint::on_loss(uint32_t seq) {
  if (seq_diff(seq, recover_) < 0) return;  // this round trip's loss was already counted
  recover_ = snd_nxt_;
  cwnd_ = std::max(std::min(kMinLossWindow, win_), std::min(cwnd_, win_) / 2);
}

void DpdkEndpoint::grow_window(uint32_t acked) {
  if (cwnd_ >= win_) return;
  cwnd_acc_ += acked;
  cwnd_ = std::min(win_, cwnd_ + cwnd_acc_ / 4);
  cwnd_acc_ %= 4;
}

void DpdkEndpoint::complete_sends() {
  while (!sends_.empty() && seg_idx_ > 0) {
    SendSlot& s = sends_.front();
    if (!s.segmented || seq_diff(s.last_seq, snd_una_) >= 0) break;
    ++t_->counters_.msgs_sent;
    core_.complete(s.req.wr_id, s.req.tag, s.req.len, Op::kSend, Code::kOk);
    sends_.pop();
    --seg_idx_;
    ++msg_una_;
  }
}

// One retransmission timer per connection, as TCP has: it runs from the later of the oldest
// packet's (re)transmission and the last ack that moved snd_una_. On expiry the first
// kRetxBurst packets not selectively acknowledged are resent (the first doubles as a window
// probe); holes further on are fast-retransmitted as the acks of those bring selective acks.
// Timing every packet on its own instead made a peer that was merely descheduled for longer
// than the RTO trigger a flood of duplicate retransmissions, and every packet sent before the
// pause timed out again right after the first ack.
void DpdkEndpoint::retransmit_timed_out(uint64_t now) {
  if (snd_una_ == snd_nxt_) return;
  // A resent hole lost again: once every later packet is held no ack brings news, so the
  // timer checks it too (at 5 % loss most retransmission timeouts were such holes).
  if (sacked_ > 0 && seq_diff(high_sacked_, snd_una_) > 0) fast_retransmit(high_sacked_);
  const uint64_t rto = std::min(rto_ << backoff_, t_->opts().rto_max_ns);
  TxPkt& head = inflight_[snd_una_ & mask_];
  if (now - std::max(head.sent, last_advance_) < rto) return;
  ++t_->counters_.timeouts;
  on_loss(snd_una_);
  if (backoff_ < kMaxBackoff) ++backoff_;
  uint32_t sent = 0;
  for (uint32_t s = snd_una_; s != snd_nxt_; ++s) {
    TxPkt& p = inflight_[s & mask_];
    p.fast = false;
    if (sent < kRetxBurst && (s == snd_una_ || !p.sacked) && transmit(s)) ++sent;
  }
}

void DpdkEndpoint::timers(uint64_t now) {
  if (failed()) return;
  const auto& o = t_->opts();
  if (!connected_) {
    if (now >= connect_deadline_) {
      fail(Status(Code::kTimeout, "dpdk: " + peer_name_ + " (" + remote_ +
                                      ") did not answer the connection handshake in time; is "
                                      "it running and attached to the same device pair?"));
      return;
    }
    if (now >= next_syn_) {
      send_control(PktType::kSyn);
      syn_interval_ = std::min<uint64_t>(syn_interval_ * 2, 100'000'000);
      next_syn_ = now + syn_interval_;
    }
    return;
  }
  retransmit_timed_out(now);
  if (links_.many()) check_links(now);
  const bool pending = !sends_.empty() || core_.posted() > 0 || t_->core().any_posted() > 0;
  if (pending && now - last_rx_ > o.peer_timeout_ns) {
    fail(Status(Code::kRemoteError,
                "dpdk: peer " + peer_name_ + " (" + remote_ + ") sent nothing for " +
                    std::to_string((now - last_rx_) / 1'000'000) +
                    " ms while requests were pending (dpdk.peer_timeout_ms): its process is "
                    "stopped, hung or gone (with transport.progress=caller, a rank computing "
                    "that long outside gradwire looks the same) — check it"));
    return;
  }
  if (now - last_tx_ >= o.heartbeat_ns) {
    ++t_->counters_.heartbeats;
    // On every live link: the peer hears us while the link its data came in on is down.
    for (int k = 0; k < links_.n(); ++k)
      if (!links_.dead(k)) send_control(PktType::kAck, k);
  }
}

void DpdkEndpoint::on_fin(const WireHdr& h) {
  on_ack(h);  // its final ack: what it consumed before closing
  fail(Status(Code::kRemoteError,
              "dpdk: peer " + peer_name_ + " (" + remote_ + ") closed the connection"),
       true);
}

}  // namespace gw::drv::dpdk
