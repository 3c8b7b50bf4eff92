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
  if (d > 0) ++t_->counters_.out_of_order;
  if (seq_diff(h.seq + 1, rx_high_) > 0) rx_high_ = h.seq + 1;
  // A batch is taken apart in order (advance); it waits here like an unmatched packet.
  const bool data = h.type == static_cast<uint8_t>(PktType::kData);
  int mi = data ? lookup_msg(h.msg_id) : -1;
  // The next message to match may start behind a hole: every earlier one is matched, so the
  // order holds, and its packets go straight to the buffer instead of being held.
  if (mi < 0 && data && d > 0 && h.msg_id == next_match_ && h.offset == 0) mi = match_new(h);
  if (mi >= 0) {
    const InMsg& im = msgs_[mi];
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
  const InMsg& im = msgs_[mi];
  return im.active && !im.complete && im.msg_id == msg_id ? mi : -1;
}

void DpdkEndpoint::copy_in(int mi, const WireHdr& h, const rte_mbuf* m, uint32_t off) {
  InMsg& im = msgs_[mi];
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
    if (s.m) {
      int mi = lookup_msg(s.h.msg_id);
      if (mi < 0) {
        if (s.h.msg_id != next_match_ || s.h.offset != 0) {
          fail(Status(Code::kProtocolError,
                      "dpdk: packet " + std::to_string(s.h.seq) + " from " + peer_name_ +
                          " belongs to message " + std::to_string(s.h.msg_id) +
                          " at offset " + std::to_string(s.h.offset) + ", expected message " +
                          std::to_string(next_match_) + " to start"));
          return;
        }
        mi = match_new(s.h);
        if (mi < 0) {
          stalled_ = true;
          return;
        }
      } else if (msgs_[mi].tag != s.h.tag || msgs_[mi].len != s.h.msg_len) {
        ++t_->counters_.bad_segment;
        fail(Status(Code::kProtocolError, "dpdk: packet " + std::to_string(s.h.seq) + " from " +
                                              peer_name_ + " disagrees with its message"));
        return;
      }
      place(mi, s.h, s.m, s.off);
      s.m = nullptr;
      --t_->held_;
      s.msg = mi;
    } else if (s.msg < 0) {
      s.msg = lookup_msg(s.h.msg_id);
    }
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
  if (free_msgs_.empty()) return -1;
  int ri = recvs_.head();
  while (ri >= 0 && recvs_[ri].req.tag != kAnyTag && recvs_[ri].req.tag != h.tag)
    ri = recvs_.next(ri);
  auto& any = t_->any_;
  int ai = any.head();
  while (ai >= 0 && any[ai].req.tag != kAnyTag && any[ai].req.tag != h.tag) ai = any.next(ai);
  const int m = free_msgs_.back();
  InMsg& im = msgs_[m];
  if (ri < 0 && ai < 0) {
    if (t_->unexpected_used_ + h.msg_len > t_->opts().unexpected_bytes) return -1;
    if (h.msg_len > 0) {
      im.ubuf.reset(new (std::nothrow) uint8_t[h.msg_len]);
      if (!im.ubuf) return -1;
    }
    t_->unexpected_used_ += h.msg_len;
    ++t_->counters_.unexpected_msgs;
    im.unode = unexp_.push_back(m);  // never full: a node per message slot
    im.dest = Dest::kUnexpected;
    im.base = im.ubuf.get();
  } else {
    bool use_any = ri < 0 || (ai >= 0 && any[ai].post_seq < recvs_[ri].post_seq);
    im.req = use_any ? any[ai].req : recvs_[ri].req;
    if (use_any) {
      any.erase(ai);
      ++outstanding_;  // the any-source reservation now completes through this endpoint
    } else {
      recvs_.erase(ri);
    }
    if (h.msg_len > im.req.len) {
      ++t_->counters_.truncated_recvs;
      complete(im.req.wr_id, h.tag, h.msg_len, Op::kRecv, Code::kInvalidArgument);
      im.dest = Dest::kDrain;
      im.base = nullptr;
    } else {
      im.dest = Dest::kUser;
      im.base = static_cast<uint8_t*>(im.req.buf);
    }
  }
  free_msgs_.pop_back();
  im.active = true;
  im.complete = im.claimed = im.claim_err = false;
  im.msg_id = h.msg_id;
  im.tag = h.tag;
  im.len = h.msg_len;
  im.arrival = t_->arrivals_++;
  msg_map_[h.msg_id & mask_] = m;
  ++next_match_;
  return m;
}

void DpdkEndpoint::finish_msg(int m) {
  InMsg& im = msgs_[m];
  ++t_->counters_.msgs_received;
  if (msg_map_[im.msg_id & mask_] == m) msg_map_[im.msg_id & mask_] = -1;
  switch (im.dest) {
    case Dest::kUser:
      complete(im.req.wr_id, im.tag, im.len, Op::kRecv, Code::kOk);
      release_msg(m);
      break;
    case Dest::kDrain:
      release_msg(m);
      break;
    case Dest::kUnexpected:
      im.complete = true;
      if (im.claimed) deliver_unexpected(m);
      break;
  }
}

// The oldest unclaimed unexpected message with this tag. unexp_ holds them in send order (they
// are matched in order): scanning every message slot per posted receive took 40 % of a
// receiver's time once small messages ran ahead of the receives.
int DpdkEndpoint::find_unexpected(uint64_t tag) {
  for (int i = unexp_.head(); i >= 0; i = unexp_.next(i)) {
    const int m = unexp_[i];
    if (tag == kAnyTag || msgs_[m].tag == tag) return m;
  }
  return -1;
}

void DpdkEndpoint::bind_unexpected(int m, const RecvRequest& r) {
  InMsg& im = msgs_[m];
  im.claimed = true;
  unexp_.erase(im.unode);
  im.unode = -1;
  im.req = r;
  if (im.len > r.len) {
    ++t_->counters_.truncated_recvs;
    im.claim_err = true;
    complete(r.wr_id, im.tag, im.len, Op::kRecv, Code::kInvalidArgument);
  }
  if (im.complete) deliver_unexpected(m);
}

void DpdkEndpoint::deliver_unexpected(int m) {
  InMsg& im = msgs_[m];
  if (!im.claim_err) {
    if (im.len) std::memcpy(im.req.buf, im.ubuf.get(), im.len);
    complete(im.req.wr_id, im.tag, im.len, Op::kRecv, Code::kOk);
  }
  release_msg(m);
}

void DpdkEndpoint::release_msg(int m) {
  InMsg& im = msgs_[m];
  if (im.dest == Dest::kUnexpected) {
    t_->unexpected_used_ -= im.len;
    if (im.unode >= 0) unexp_.erase(im.unode);
    im.unode = -1;
  }
  if (msg_map_[im.msg_id & mask_] == m) msg_map_[im.msg_id & mask_] = -1;
  im.ubuf.reset();
  im.base = nullptr;
  im.active = false;
  im.dest = Dest::kUser;
  free_msgs_.push_back(m);
}

}  // namespace gw::drv::dpdk
