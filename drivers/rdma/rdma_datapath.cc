// RdmaEndpoint hot path: work completions, matching, eager and rendezvous protocols, credits.
#include <arpa/inet.h>

#include <cstring>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

int32_t RdmaEndpoint::credits() const {
  uint32_t pp = peer_posted_, w = credit_->peer_posted;
  if (static_cast<int32_t>(w - pp) > 0) pp = w;
  return static_cast<int32_t>(pp - sent_);
}

bool RdmaEndpoint::credit_due() const {
  if (failed() || peer_credit_rkey_ == 0) return false;
  uint32_t every = std::max<uint32_t>(1, t_->opts().recv_depth / 4);
  return posted_ - advertised_ >= every;
}

void RdmaEndpoint::repost(uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(rx_mem_.get() + size_t{slot} * slot_bytes_),
              static_cast<uint32_t>(slot_bytes_), rx_mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = make_wr(WrKind::kRecv, id_, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp_.get(), &wr, &bad);
  if (rc != 0) {
    fail(Status(Code::kSystemError, "rdma: ibv_post_recv toward " + peer_name_, rc));
    return;
  }
  ++posted_;
}

void RdmaEndpoint::complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code) {
  Completion c;
  c.wr_id = wr_id;
  c.tag = tag;
  c.len = len;
  c.ep = this;
  c.peer_id = peer_id_;
  c.op = op;
  c.code = code;
  t_->push_completion(c);
}

void RdmaEndpoint::finish_send(uint32_t s, Code code) {
  SendSlot& slot = sends_[s];
  if (code == Code::kOk) {
    ++t_->counters_.msgs_sent;
    t_->counters_.bytes_sent += slot.req.len;
  }
  complete(slot.req.wr_id, slot.req.tag, code == Code::kOk ? slot.req.len : 0, Op::kSend, code);
  if (slot.reg) t_->regcache().release(slot.reg);
  slot.reg = nullptr;
  slot.used = false;
  free_sends_.push_back(s);
}

Status RdmaEndpoint::wc_error(const ibv_wc& wc, const char* what) const {
  return Status(wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR
                    ? Code::kUnavailable
                    : Code::kRemoteError,
                std::string("rdma: ") + what + " to " + peer_name_ + " on " + t_->dev().name +
                    " failed: " + ibv_wc_status_str(wc.status) + " (vendor error " +
                    std::to_string(wc.vendor_err) + ")" +
                    (wc.status == IBV_WC_RETRY_EXC_ERR ? "; is the peer alive?" : ""));
}

Status RdmaEndpoint::protocol_error(const std::string& what) {
  ++t_->counters_.protocol_errors;
  return Status(Code::kProtocolError, "rdma: malformed message from " + peer_name_ + ": " + what);
}

void RdmaEndpoint::on_wc(const ibv_wc& wc, WrKind kind, uint32_t idx) {
  if (kind == WrKind::kRecv) {
    on_recv(wc, idx);
    return;
  }
  if (sq_used_ > 0) --sq_used_;
  if (kind == WrKind::kMsg) free_tx_.push_back(idx);
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) {
      const char* what = kind == WrKind::kMsg ? "SEND" : kind == WrKind::kCredit
                                                             ? "credit WRITE"
                                                             : "RDMA WRITE";
      fail(wc_error(wc, what));
    }
    return;
  }
  if (kind == WrKind::kWriteImm && idx < sends_.size() && sends_[idx].used) {
    ++t_->counters_.rndv_sent;
    finish_send(idx, Code::kOk);
  }
}

void RdmaEndpoint::on_recv(const ibv_wc& wc, uint32_t slot) {
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) fail(wc_error(wc, "receive from"));
    return;
  }
  if (failed()) return;
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    uint32_t r = ntohl(wc.imm_data) & kImmSlotMask;
    if (r >= rndv_.size() || !rndv_[r].used) {
      fail(protocol_error("RDMA WRITE for receive slot " + std::to_string(r) +
                          ", which is not waiting for one"));
      return;
    }
    RndvRecv& rv = rndv_[r];
    ++t_->counters_.msgs_received;
    t_->counters_.bytes_received += rv.len;
    complete(rv.req.wr_id, rv.tag, rv.len, Op::kRecv, Code::kOk);
    if (rv.reg) t_->regcache().release(rv.reg);
    rv = RndvRecv{};
    free_rndv_.push_back(r);
    repost(slot);
    return;
  }
  const uint8_t* buf = rx_mem_.get() + size_t{slot} * slot_bytes_;
  MsgHdr h;
  if (wc.byte_len < sizeof h) {
    fail(protocol_error(std::to_string(wc.byte_len) + " bytes, shorter than a header"));
    return;
  }
  std::memcpy(&h, buf, sizeof h);
  const size_t payload = wc.byte_len - sizeof h;
  const char* bad = nullptr;
  if (h.version != kWireVersion) {
    bad = "unknown version";
  } else if (h.type == static_cast<uint8_t>(MsgType::kEager)) {
    if (h.len != payload || h.len > t_->opts().eager_bytes) bad = "eager length mismatch";
  } else if (h.type == static_cast<uint8_t>(MsgType::kRts)) {
    if (payload != 0 || h.len == 0) bad = "bad rendezvous request";
  } else if (h.type == static_cast<uint8_t>(MsgType::kCts) ||
             h.type == static_cast<uint8_t>(MsgType::kReject)) {
    if (payload != 0 || h.id >= sends_.size() || !sends_[h.id].used ||
        !sends_[h.id].awaiting_cts) {
      bad = "clear-to-send for a send that is not waiting for one";
    } else if (h.type == static_cast<uint8_t>(MsgType::kCts) &&
               (h.len < sends_[h.id].req.len || h.rkey == 0)) {
      bad = "clear-to-send smaller than the message";
    }
  } else {
    bad = "unknown message type";
  }
  if (bad) {
    fail(protocol_error(std::string(bad) + " (type " + std::to_string(h.type) + ", length " +
                        std::to_string(h.len) + ", " + std::to_string(wc.byte_len) +
                        " bytes)"));
    return;
  }
  if (static_cast<int32_t>(h.posted - peer_posted_) > 0) peer_posted_ = h.posted;
  on_message(h, buf + sizeof h);
  if (!failed()) repost(slot);
}

void RdmaEndpoint::on_message(const MsgHdr& h, const uint8_t* payload) {
  auto type = static_cast<MsgType>(h.type);
  if (type == MsgType::kCts) {
    SendSlot& s = sends_[h.id];
    s.awaiting_cts = false;
    TxItem it;
    it.write = true;
    it.id = h.id;
    it.id2 = h.id2;
    it.len = s.req.len;
    it.addr = h.addr;
    it.rkey = h.rkey;
    if (txq_.full()) {
      fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
      return;
    }
    txq_.push(it);
    return;
  }
  if (type == MsgType::kReject) {
    sends_[h.id].awaiting_cts = false;
    finish_send(h.id, Code::kOk);  // delivered; the receiver's buffer was too small
    return;
  }
  // A new message (eager or rendezvous request): match it in posting order.
  int mine = -1;
  for (int i = recvs_.head(); i >= 0; i = recvs_.next(i)) {
    if (recvs_[i].req.tag == kAnyTag || recvs_[i].req.tag == h.tag) {
      mine = i;
      break;
    }
  }
  int any = bound_ ? t_->find_any(h.tag, mine >= 0 ? recvs_[mine].post_seq : UINT64_MAX) : -1;
  if (any >= 0) {
    deliver(t_->take_any(any), type, h.tag, h.len, payload, h.id);
  } else if (mine >= 0) {
    RecvRequest r = recvs_[mine].req;
    recvs_.erase(mine);
    deliver(r, type, h.tag, h.len, payload, h.id);
  } else {
    ++t_->counters_.unexpected_msgs;
    Unexpected u;
    u.type = type;
    u.tag = h.tag;
    u.len = h.len;
    u.send_id = h.id;
    u.arrival = t_->next_arrival();
    if (type == MsgType::kEager && h.len > 0) {
      if (t_->unexpected_used_ + h.len > t_->opts().unexpected_bytes) {
        fail(Status(Code::kResourceExhausted,
                    "rdma: more than rdma.unexpected_bytes = " +
                        std::to_string(t_->opts().unexpected_bytes) +
                        " bytes of messages arrived before their receives (from " + peer_name_ +
                        "); post receives earlier or raise the limit"));
        return;
      }
      u.data.reset(new uint8_t[h.len]);
      std::memcpy(u.data.get(), payload, h.len);
      t_->unexpected_used_ += h.len;
    }
    unexp_.push_back(std::move(u));
  }
}

int RdmaEndpoint::find_unexpected(uint64_t tag) const {
  for (size_t i = 0; i < unexp_.size(); ++i)
    if (tag == kAnyTag || unexp_[i].tag == tag) return static_cast<int>(i);
  return -1;
}

void RdmaEndpoint::take_unexpected(int u, const RecvRequest& r) {
  Unexpected m = std::move(unexp_[static_cast<size_t>(u)]);
  unexp_.erase(unexp_.begin() + u);
  if (m.data) t_->unexpected_used_ -= m.len;
  deliver(r, m.type, m.tag, m.len, m.data.get(), m.send_id);
}

void RdmaEndpoint::deliver(const RecvRequest& r, MsgType type, uint64_t tag, uint64_t len,
                           const uint8_t* payload, uint32_t send_id) {
  TxItem it;
  it.id = send_id;
  if (len > r.len) {
    ++t_->counters_.truncated_recvs;
    complete(r.wr_id, tag, len, Op::kRecv, Code::kInvalidArgument);
    if (type == MsgType::kEager) return;
    it.type = MsgType::kReject;
  } else if (type == MsgType::kEager) {
    if (len) std::memcpy(r.buf, payload, len);
    ++t_->counters_.msgs_received;
    t_->counters_.bytes_received += len;
    complete(r.wr_id, tag, len, Op::kRecv, Code::kOk);
    return;
  } else {
    RegCache::Entry* e = region_entry(r.mr);
    if (e) {
      ++e->refs;
    } else {
      auto got = t_->regcache().acquire(r.buf, len);
      if (!got.ok()) {
        t_->log_->warn("{}", got.status().to_string());
        complete(r.wr_id, tag, 0, Op::kRecv, got.status().code());
        it.type = MsgType::kReject;
        txq_.push(it);
        return;
      }
      e = *got;
    }
    if (free_rndv_.empty()) {
      fail(Status(Code::kInternal, "rdma: out of rendezvous slots toward " + peer_name_));
      return;
    }
    uint32_t s = free_rndv_.back();
    free_rndv_.pop_back();
    rndv_[s] = RndvRecv{r, tag, len, e, true};
    it.type = MsgType::kCts;
    it.id2 = s;
    it.len = len;
    it.addr = reinterpret_cast<uintptr_t>(r.buf);
    it.rkey = e->mr->rkey;
  }
  if (txq_.full()) {
    fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
    return;
  }
  txq_.push(it);
}

bool RdmaEndpoint::post_msg(const TxItem& it) {
  if (sq_used_ >= t_->opts().sq_depth || free_tx_.empty()) return false;
  if (credits() <= 0) {
    ++t_->counters_.credit_stalls;
    return false;
  }
  uint32_t slot = free_tx_.back();
  uint8_t* buf = tx_mem_.get() + size_t{slot} * slot_bytes_;
  MsgHdr h;
  h.type = static_cast<uint8_t>(it.type);
  h.posted = posted_;
  h.id = it.id;
  h.id2 = it.id2;
  h.tag = it.tag;
  h.len = it.len;
  h.addr = it.addr;
  h.rkey = it.rkey;
  std::memcpy(buf, &h, sizeof h);
  size_t total = sizeof h;
  if (it.type == MsgType::kEager) {
    if (it.len) std::memcpy(buf + sizeof h, sends_[it.id].req.buf, it.len);
    total += it.len;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(total), tx_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr(WrKind::kMsg, id_, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (total <= max_inline_) {
    wr.send_flags |= IBV_SEND_INLINE;
    ++t_->counters_.inline_sends;
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_.get(), &wr, &bad);
  if (rc != 0) {
    fail(Status(Code::kSystemError, "rdma: ibv_post_send toward " + peer_name_, rc));
    return false;
  }
  free_tx_.pop_back();
  ++sq_used_;
  ++sent_;
  advertised_ = posted_;
  if (it.type == MsgType::kEager) {
    ++t_->counters_.eager_sent;
    finish_send(it.id, Code::kOk);  // the payload is copied: the caller's buffer is free
  }
  return true;
}

bool RdmaEndpoint::post_write(TxItem& it) {
  SendSlot& s = sends_[it.id];
  const uint64_t chunk_max = t_->opts().write_chunk;
  while (s.written < it.len) {
    uint64_t chunk = std::min(chunk_max, it.len - s.written);
    bool last = s.written + chunk == it.len;
    if (sq_used_ >= t_->opts().sq_depth) return false;
    if (last && credits() <= 0) {
      ++t_->counters_.credit_stalls;
      return false;
    }
    ibv_sge sge{reinterpret_cast<uintptr_t>(s.req.buf) + s.written,
                static_cast<uint32_t>(chunk), s.lkey};
    ibv_send_wr wr{};
    wr.wr_id = make_wr(last ? WrKind::kWriteImm : WrKind::kWrite, id_, it.id);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(it.id2);
    wr.wr.rdma.remote_addr = it.addr + s.written;
    wr.wr.rdma.rkey = it.rkey;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_.get(), &wr, &bad);
    if (rc != 0) {
      fail(Status(Code::kSystemError, "rdma: ibv_post_send (RDMA WRITE) toward " + peer_name_,
                  rc));
      return false;
    }
    ++sq_used_;
    s.written += chunk;
    if (last) ++sent_;
  }
  return true;
}

void RdmaEndpoint::post_credit() {
  if (sq_used_ >= t_->opts().sq_depth) return;
  credit_->my_posted = posted_;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&credit_->my_posted), 4, credit_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr(WrKind::kCredit, id_, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | (max_inline_ >= 4 ? IBV_SEND_INLINE : 0);
  wr.wr.rdma.remote_addr = peer_credit_addr_;
  wr.wr.rdma.rkey = peer_credit_rkey_;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp_.get(), &wr, &bad) != 0) return;
  ++sq_used_;
  ++t_->counters_.credit_writes;
  advertised_ = posted_;
}

void RdmaEndpoint::flush() {
  if (failed() || !qp_) return;
  while (!txq_.empty()) {
    TxItem& it = txq_.front();
    if (!(it.write ? post_write(it) : post_msg(it))) break;
    if (failed()) return;
    txq_.pop();
  }
  if (credit_due()) post_credit();
}

void RdmaEndpoint::fail(const Status& st) {
  if (failed()) return;
  error_ = st;
  ++t_->counters_.endpoint_errors;
  t_->log_->warn("{}", st.to_string());
  const Code code = st.code();
  for (uint32_t i = 0; i < sends_.size(); ++i)
    if (sends_[i].used) finish_send(i, code);
  while (recvs_.head() >= 0) {
    int ri = recvs_.head();
    complete(recvs_[ri].req.wr_id, recvs_[ri].req.tag, 0, Op::kRecv, code);
    recvs_.erase(ri);
  }
  for (uint32_t i = 0; i < rndv_.size(); ++i) {
    RndvRecv& rv = rndv_[i];
    if (!rv.used) continue;
    complete(rv.req.wr_id, rv.tag, 0, Op::kRecv, code);
    if (rv.reg) t_->regcache().release(rv.reg);
    rv = RndvRecv{};
  }
  for (auto& u : unexp_) t_->unexpected_used_ -= u.data ? u.len : 0;
  unexp_.clear();
  txq_.clear();
  if (qp_) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE);
  }
  ctrl_ = Fd();  // closing it leaves the epoll set
  complete(0, 0, 0, Op::kEndpointError, code);
}

}  // namespace gw::drv::rdma
