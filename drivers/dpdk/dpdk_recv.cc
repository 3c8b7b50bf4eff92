// DpdkEndpoint hot path, receive side: in-place reassembly, batches, message matching in send
// order, unexpected messages. No allocation except the bounded buffers of unexpected messages.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_mbuf.h>

#include <cstring>

#include "dpdk_endpoint.h"
#include "log.h"

namespace gw::drv::dpdk {

void DpdkEndpoint::on_data(const WireHdr& h, rte_mbuf* m, uint32_t off) {
  if (!connected_) {
    remote_conn_ = h.src_conn;
    connected_ = true;
  }
  on_ack(h);
  need_ack_ = true;
  last_data_ = t_->now();
  const int32_t d = seq_diff(h.seq, rcv_nxt_);
  RxSlot& s = rx_[h.seq & mask_];
  if (d < 0 || (d < static_cast<int32_t>(rwin_) && s.present)) {
    ++t_->counters_.dup_pkts;
    rte_pktmbuf_free(m);
    return;
  }
  if (d >= static_cast<int32_t>(rwin_)) {
    ++t_->counters_.window_drops;
    rte_pktmbuf_free(m);
    return;
  }
  // The incast credits read arrivals past a hole as loss; over several links they are the
  // spraying's reordering, so they count apart.
  if (d > 0) ++(links_.many() ? t_->counters_.link_reordered : t_->counters_.out_of_order);
  if (seq_diff(h.seq + 1, rx_high_) > 0) rx_high_ = h.seq + 1;
  // A batch is taken apart in order (advance); it waits here like an unmatched packet.
  const bool data = h.type == static_cast<uint8_t>(PktType::kData);
  int mi = data ? lookup_msg(h.msg_id) : -1;
  // The next message to match may start behind a hole: every earlier one is matched, so the
  // order holds, and its packets go straight to the buffer instead of being held.
  if (mi < 0 && data && d > 0 && h.msg_id == next_match_ && h.offset == 0) mi = match_new(h);
  if (mi >= 0) {
    const core::InMsg& im = core_.msg(mi);
    if (im.tag != h.tag || im.len != h.msg_len) {
      ++t_->counters_.bad_segment;
      rte_pktmbuf_free(m);
      return;
    }
    place(mi, h, m, off);
    s.m = nullptr;
  } else {
    if (t_->held_ >= t_->opts().held_max) {
      ++t_->counters_.held_drops;
      rte_pktmbuf_free(m);
      return;
    }
    ++t_->held_;
    s.m = m;
    s.off = off;
  }
  s.h = h;
  s.msg = mi;
  s.sub = 0;
  s.present = true;
  rx_bits_[(h.seq & mask_) >> 6] |= uint64_t{1} << (h.seq & 63);
  if (d == 0) advance();
}

int DpdkEndpoint::lookup_msg(uint32_t msg_id) const {
  int mi = msg_map_[msg_id & mask_];
  if (mi < 0) return -1;
  const core::InMsg& im = core_.msg(mi);
  return im.active && !im.complete && im.seq == msg_id ? mi : -1;
}

void DpdkEndpoint::copy_in(int mi, const WireHdr& h, const rte_mbuf* m, uint32_t off) {
  if (rx_dev(mi)) return copy_in_dev(mi, h, m, off);
  const core::InMsg& im = core_.msg(mi);
  if (im.base && h.seg_len > 0) {
    uint8_t* dst = im.base + h.offset;  // offset + seg_len <= msg_len <= capacity: checked
    const void* src = rte_pktmbuf_read(m, off, h.seg_len, dst);
    if (src != dst) std::memcpy(dst, src, h.seg_len);
  }
  t_->counters_.bytes_received += h.seg_len;
}

void DpdkEndpoint::place(int mi, const WireHdr& h, rte_mbuf* m, uint32_t off) {
  copy_in(mi, h, m, off);
  rte_pktmbuf_free(m);
}

// Matches, fills and finishes the messages of the batch in s (records checked on receive),
// resuming after those already done. @return false when one cannot be matched yet.
bool DpdkEndpoint::consume_batch(RxSlot& s) {
  WireHdr mh = s.h;
  mh.type = static_cast<uint8_t>(PktType::kData);
  while (s.sub < s.h.msg_len) {
    BatchRec r;
    const void* p = rte_pktmbuf_read(s.m, s.off, sizeof r, &r);
    if (p != &r) std::memcpy(&r, p, sizeof r);
    mh.msg_id = s.h.msg_id + s.sub;
    mh.tag = r.tag;
    mh.msg_len = mh.seg_len = static_cast<uint16_t>(r.len);
    if (mh.msg_id != next_match_) {
      fail(Status(Code::kProtocolError, "dpdk: batch from " + peer_name_ + " starts at message " +
                                            std::to_string(mh.msg_id) + ", expected " +
                                            std::to_string(next_match_)));
      return false;
    }
    const int mi = match_new(mh);
    if (mi < 0) return false;
    copy_in(mi, mh, s.m, s.off + static_cast<uint32_t>(sizeof r));
    s.off += static_cast<uint32_t>(sizeof r) + r.len;
    ++s.sub;
    finish_msg(mi);
  }
  rte_pktmbuf_free(s.m);
  s.m = nullptr;
  --t_->held_;
  return true;
}

// Consumes packets in order from rcv_nxt_: matches new messages, places held payload,
// finishes messages. Stops (stalled) when a message cannot be matched yet.
// advance's step for the data packet at rcv_nxt_ (inlined, one call site): its message is
// matched and it is placed, or checked against the one it was placed in on arrival (s.msg).
// @return false: stop (failed, or stalled_ set: no receive matches yet).
[[gnu::always_inline]] inline bool DpdkEndpoint::take_data(RxSlot& s) {
  if (s.m) {
    int mi = lookup_msg(s.h.msg_id);
    if (mi < 0) {
      if (s.h.msg_id != next_match_ || s.h.offset != 0) {
        fail(Status(Code::kProtocolError, "dpdk: packet " + std::to_string(s.h.seq) + " from " +
                                              peer_name_ + " belongs to message " +
                                              std::to_string(s.h.msg_id) + " at offset " +
                                              std::to_string(s.h.offset) + ", expected message " +
                                              std::to_string(next_match_) + " to start"));
        return false;
      }
      mi = match_new(s.h);
      if (mi < 0) {
        stalled_ = true;
        return false;
      }
    } else if (core_.msg(mi).tag != s.h.tag || core_.msg(mi).len != s.h.msg_len) {
      ++t_->counters_.bad_segment;
      fail(Status(Code::kProtocolError, "dpdk: packet " + std::to_string(s.h.seq) + " from " +
                                            peer_name_ + " disagrees with its message"));
      return false;
    }
    place(mi, s.h, s.m, s.off);
    s.m = nullptr;
    --t_->held_;
    s.msg = mi;
  } else if (s.msg < 0) {
    s.msg = lookup_msg(s.h.msg_id);
  } else if (lookup_msg(s.h.msg_id) != s.msg) {
    // Placed on arrival into a message that an earlier packet has finished since (a peer
    // that sent its end twice): finishing it again would complete its receive twice.
    fail(Status(Code::kProtocolError, "dpdk: packet " + std::to_string(s.h.seq) + " from " +
                                          peer_name_ + " belongs to message " +
                                          std::to_string(s.h.msg_id) + ", already complete"));
    return false;
  }
  return true;
}

void DpdkEndpoint::advance() {
  stalled_ = false;
  while (!failed()) {
    RxSlot& s = rx_[rcv_nxt_ & mask_];
    if (!s.present) break;
    if (s.h.type == static_cast<uint8_t>(PktType::kBatch)) {
      if (!consume_batch(s)) {
        stalled_ = !failed();
        return;
      }
      s.present = false;
      rx_bits_[(rcv_nxt_ & mask_) >> 6] &= ~(uint64_t{1} << (rcv_nxt_ & 63));
      ++rcv_nxt_;
      need_ack_ = true;
      continue;
    }
    if (!take_data(s)) return;
    const int mi = s.msg;
    const bool last = s.h.offset + s.h.seg_len == s.h.msg_len;
    s.present = false;
    rx_bits_[(rcv_nxt_ & mask_) >> 6] &= ~(uint64_t{1} << (rcv_nxt_ & 63));
    s.msg = -1;
    ++rcv_nxt_;
    need_ack_ = true;
    if (last && mi >= 0) finish_msg(mi);
  }
}

int DpdkEndpoint::match_new(const WireHdr& h) {
  const int m = core_.begin(h.msg_id, h.tag, h.msg_len);
  if (m < 0) return -1;
  if (t_->rx_pool_now()) mark_rx_dev(m);
  msg_map_[h.msg_id & mask_] = m;
  ++next_match_;
  return m;
}

void DpdkEndpoint::finish_msg(int m) {
  if (msg_map_[core_.msg(m).seq & mask_] == m) msg_map_[core_.msg(m).seq & mask_] = -1;
  if (rx_dev(m)) {  // finished once its last host-to-device copy is
    RxDev& x = rx_dev_[static_cast<size_t>(m)];
    x.arrived = true;
    if (x.copies > 0) return;
    x = RxDev{};
  }
  core_.finish(m);
}

}  // namespace gw::drv::dpdk
