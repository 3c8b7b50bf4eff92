// RdmaEndpoint hot path: work completions, matching, eager and rendezvous protocols, credits.
#include <arpa/inet.h>

#include <cstring>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

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

// The opcode of a failed completion is undefined: `what` says whether it was a receive.
Status RdmaEndpoint::wc_error(const ibv_wc& wc, const char* what) const {
  const bool recv = std::strcmp(what, "receive") == 0;
  const char* hint = "";
  if (wc.status == IBV_WC_RETRY_EXC_ERR) hint = "; is the peer alive?";
  if (recv && (wc.status == IBV_WC_LOC_LEN_ERR || wc.status == IBV_WC_LOC_QP_OP_ERR)) {
    hint =
        "; the peer sent more than a receive buffer holds (different rdma.eager_bytes, or "
        "not a gradwire peer)";
  }
  return Status(wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR
                    ? Code::kUnavailable
                    : Code::kRemoteError,
                std::string("rdma: ") + what + (recv ? " from " : " to ") + peer_name_ + " on " +
                    t_->dev().name + " failed: " + ibv_wc_status_str(wc.status) +
                    " (vendor error " + std::to_string(wc.vendor_err) + ")" + hint);
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
  if (kind == WrKind::kLaneRecv) {
    on_lane_recv(wc, idx);
    return;
  }
  if (kind == WrKind::kStaged) {
    on_staged_wc(wc, idx);
    return;
  }
  const bool write = kind == WrKind::kWrite || kind == WrKind::kWriteImm;
  const uint32_t lane = write ? idx >> 24 : 0;
  if (write) idx &= kImmSlotMask;
  if (lane < lanes_.size()) retire(lane);
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) {
      const char* what = kind == WrKind::kMsg || kind == WrKind::kZeroCopy ? "SEND"
                         : kind == WrKind::kCredit                         ? "credit WRITE"
                                                                           : "RDMA WRITE";
      fail(wc_error(wc, what));
    }
    return;
  }
  if (kind == WrKind::kWriteImm) stripe_written(idx);
  if (kind == WrKind::kZeroCopy && idx < sends_.size() && sends_[idx].used)
    finish_send(idx, Code::kOk);
}

void RdmaEndpoint::stripe_written(uint32_t s) {
  if (s >= sends_.size() || !sends_[s].used || sends_[s].stripes_left == 0) return;
  SendSlot& slot = sends_[s];
  // A windowed send is done once the receiver asked for its last byte and that was written.
  if (--slot.stripes_left > 0 || (slot.windowed && slot.win_next < slot.req.len)) return;
  ++t_->counters_.rndv_sent;
  if (slot.staged) ++t_->counters_.staged_sends;
  finish_send(s, Code::kOk);
}

bool RdmaEndpoint::on_write_imm(uint32_t imm) {
  uint32_t r = imm & kImmSlotMask;
  if (r < rndv_.size() && rndv_[r].used && rndv_[r].staged) return window_landed(r);
  if (r >= rndv_.size() || !rndv_[r].used || rndv_[r].stripes_left == 0) {
    fail(protocol_error("RDMA WRITE for receive slot " + std::to_string(r) +
                        ", which is not waiting for one"));
    return false;
  }
  RndvRecv& rv = rndv_[r];
  if (rv.adv_recv >= 0) {  // the first stripe of a write into an advertised receive
    if (core_.recvs()[rv.adv_recv].cookie != r) {
      fail(protocol_error("RDMA WRITE into advertised slot " + std::to_string(r) +
                          ", which a message already took"));
      return false;
    }
    claim_by_write(r);
  }
  if (--rv.stripes_left > 0) return true;
  if (rv.msg >= 0) {
    landed(r);
    return true;
  }
  t_->core().count_received();
  t_->counters_.bytes_received += rv.len;
  complete(rv.req.wr_id, rv.tag, rv.len, Op::kRecv, Code::kOk);
  if (rv.reg) t_->regcache().release(rv.reg);
  rv = RndvRecv{};
  free_rndv_.push_back(r);
  return true;
}

void RdmaEndpoint::on_lane_recv(const ibv_wc& wc, uint32_t lane) {
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) fail(wc_error(wc, "receive"));
    return;
  }
  if (failed()) return;
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
    fail(protocol_error("a SEND on data queue pair " + std::to_string(lane)));
    return;
  }
  if (on_write_imm(ntohl(wc.imm_data))) repost_lane(lane);
}

void RdmaEndpoint::on_recv(const ibv_wc& wc, uint32_t slot) {
  if (wc.status != IBV_WC_SUCCESS || failed()) return recv_failed(wc);
  ++consumed_;  // the peer used one of its credits
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    if (on_write_imm(ntohl(wc.imm_data))) repost(slot);
    return;
  }
  const uint8_t* buf = rx_mem_.get() + size_t{slot} * slot_bytes_;
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
    if (!on_header_msg(wc, buf, slot)) return;        // held: stays in its buffer
  } else if (wc.byte_len > t_->opts().eager_bytes) {  // compact eager message (rdma_wire.h)
    return compact_too_long(wc.byte_len);
  } else {
    const uint64_t tag = (uint64_t{rx_tag_hi_} << 32) | ntohl(wc.imm_data);
    if (!deliver_eager(tag, buf, wc.byte_len)) {
      MsgHdr h;
      h.type = static_cast<uint8_t>(MsgType::kEager);
      h.tag = tag;
      h.len = wc.byte_len;
      return hold(h, slot, 0);
    }
  }
  if (!failed()) repost(slot);
}

void RdmaEndpoint::recv_failed(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS && !failed()) fail(wc_error(wc, "receive"));
}

void RdmaEndpoint::compact_too_long(uint32_t len) {
  fail(protocol_error("compact eager message of " + std::to_string(len) +
                      " bytes, more than rdma.eager_bytes"));
}

// A message with a header (rdma_wire.h): validated, then handled; on error the endpoint fails.
bool RdmaEndpoint::on_header_msg(const ibv_wc& wc, const uint8_t* buf, uint32_t slot) {
  MsgHdr h;
  if (wc.byte_len < sizeof h) {
    fail(protocol_error(std::to_string(wc.byte_len) + " bytes, shorter than a header"));
    return true;
  }
  std::memcpy(&h, buf, sizeof h);
  const size_t payload = wc.byte_len - sizeof h;
  SendView view;
  const SendView* send = nullptr;
  if (h.id < sends_.size()) {
    const SendSlot& ss = sends_[h.id];
    view = {ss.used, ss.awaiting_cts, ss.windowed, ss.win_next, ss.req.len};
    send = &view;
  }
  const char* bad = check_msg(h, payload, t_->opts().eager_bytes, lanes_.size(), send);
  if (bad) {
    fail(protocol_error(std::string(bad) + " (type " + std::to_string(h.type) + ", length " +
                        std::to_string(h.len) + ", " + std::to_string(wc.byte_len) + " bytes)"));
    return true;
  }
  if (static_cast<int32_t>(h.posted - peer_posted_) > 0) peer_posted_ = h.posted;
  const auto type = static_cast<MsgType>(h.type);
  if (type == MsgType::kEager || type == MsgType::kRts)
    rx_tag_hi_ = static_cast<uint32_t>(h.tag >> 32);
  if (on_message(h, buf + sizeof h)) return true;
  hold(h, slot, sizeof h);
  return false;
}

void RdmaEndpoint::hold(const MsgHdr& h, uint32_t slot, uint32_t off) {
  if (held_.empty()) ++t_->counters_.held_stalls;
  held_.push(Held{h, slot, off});  // never full: one entry per receive buffer at most
}

bool RdmaEndpoint::held_tag(uint64_t tag) {
  for (size_t i = 0; i < held_.size(); ++i)
    if (tag == kAnyTag || held_.at(i).h.tag == tag) return true;
  return false;
}

void RdmaEndpoint::retry_held() {
  while (!held_.empty()) {
    const Held hm = held_.front();
    retrying_ = true;
    const bool taken = on_message(hm.h, rx_mem_.get() + size_t{hm.slot} * slot_bytes_ + hm.off);
    retrying_ = false;
    if (!taken) return;
    held_.pop();
    if (!failed()) repost(hm.slot);  // its credit goes back to the peer
  }
}

void RdmaEndpoint::queue_write(uint32_t s, uint32_t rslot, uint64_t addr, uint32_t rkey,
                               uint8_t stripes, uint64_t base, uint64_t len) {
  SendSlot& slot = sends_[s];
  slot.awaiting_cts = false;
  TxItem it;
  it.write = true;
  it.stripes = stripes;
  it.id = s;
  it.id2 = rslot;
  it.base = base;
  it.len = len == UINT64_MAX ? slot.req.len : len;
  it.addr = addr;
  it.rkey = rkey;
  slot.stripes_left += stripes;  // stripe offsets are set when the write reaches the front
  if (stripes > 1) ++t_->counters_.striped_sends;
  txq_.push(it);
}

bool RdmaEndpoint::on_message(const MsgHdr& h, const uint8_t* payload) {
  auto type = static_cast<MsgType>(h.type);
  if (type == MsgType::kCts) {
    if (txq_.full()) {
      fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
      return true;
    }
    queue_write(h.id, h.id2, h.addr, h.rkey, static_cast<uint8_t>(h.stripes));
    return true;
  }
  if (type == MsgType::kReject) {
    sends_[h.id].awaiting_cts = false;
    finish_send(h.id, Code::kOk);  // delivered; the receiver's buffer was too small
    return true;
  }
  if (type == MsgType::kAdv) {
    on_advert(h);
    return true;
  }
  if (type == MsgType::kWin) {
    if (txq_.full()) {
      fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
      return true;
    }
    sends_[h.id].windowed = true;
    sends_[h.id].win_next = h.tag + h.len;
    queue_write(h.id, h.id2, h.addr, h.rkey, 1, h.tag, h.len);
    return true;
  }
  if (!held_.empty() && !retrying_) return false;  // behind a held message: keep the order
  // A new message (eager or rendezvous request): the core matches it in posting order.
  const int m = core_.begin(0, h.tag, h.len, type == MsgType::kRts);
  if (m < 0) return false;  // no room to buffer it: it waits in its receive buffer
  ++matched_;
  arrived(m, type, payload, h.id);
  return true;
}

bool RdmaEndpoint::deliver_eager(uint64_t tag, const uint8_t* payload, uint32_t len) {
  if (!held_.empty()) return false;
  const int m = core_.begin(0, tag, len);
  if (m < 0) return false;
  ++matched_;
  core::InMsg& im = core_.msg(m);
  const RecvRequest& r = im.req;
  if (im.dest != core::Dest::kUser || im.cookie != core::kNoCookie ||
      (r.mr && r.mr->kind() == MemKind::kCudaDevice) || t_->staged(r.buf, r.mr)) {
    arrived(m, MsgType::kEager, payload, 0);
    return true;
  }
  if (len) std::memcpy(im.base, payload, len);
  t_->counters_.bytes_received += len;
  core_.finish(m);
  return true;
}

void RdmaEndpoint::arrived(int m, MsgType type, const uint8_t* payload, uint32_t send_id) {
  core::InMsg& im = core_.msg(m);
  if (im.dest == core::Dest::kUnexpected) {
    if (type == MsgType::kEager) {  // whole: it waits for its receive
      if (im.len) std::memcpy(im.base, payload, im.len);
      core_.finish(m);
      return;
    }
    im.drv[0] = send_id;
    im.drv[1] = kNoSlot;
    pull(m);
    return;
  }
  if (im.cookie != core::kNoCookie) unadvertise(im.cookie);  // taken the usual way
  if (im.dest == core::Dest::kDrain) {  // too small: the core completed its receive
    core_.release(m);
    if (type == MsgType::kRts) {  // the sender's request completes: delivered, not taken
      reject_rts(send_id);
    }
    return;
  }
  const RecvRequest r = im.req;
  const uint64_t tag = im.tag, len = im.len;
  core_.release(m);
  deliver(r, type, tag, len, payload, send_id);
}

void RdmaEndpoint::deliver(const RecvRequest& r, MsgType type, uint64_t tag, uint64_t len,
                           const uint8_t* payload, uint32_t send_id) {
  TxItem it;
  it.id = send_id;
  if (type == MsgType::kEager && len > 0 &&
      (t_->staged(r.buf, r.mr) || (r.mr && r.mr->kind() == MemKind::kCudaDevice))) {
    // The CPU cannot store to device memory: a synchronous copy (small messages only: larger
    // ones come by rendezvous, or were pulled unexpectedly within rdma.unexpected_bytes).
    Status st = t_->stage_ops() ? copy_to_device(r.buf, payload, len)
                                : Status(Code::kNotSupported, "no device-copy table");
    if (!st.ok()) {
      t_->log_->warn("rdma: {} bytes from {} into CUDA memory: {}", len, peer_name_,
                     st.to_string());
      complete(r.wr_id, tag, len, Op::kRecv, st.code());
      return;
    }
    t_->core().count_received();
    t_->counters_.bytes_received += len;
    complete(r.wr_id, tag, len, Op::kRecv, Code::kOk);
    return;
  } else if (type == MsgType::kRts && t_->staged(r.buf, r.mr)) {
    start_staged_recv(r, tag, len, send_id);
    return;
  } else if (type == MsgType::kEager) {
    if (len) std::memcpy(r.buf, payload, len);
    t_->core().count_received();
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
    // Stripes of at least rdma.min_stripe_bytes, one per lane at most.
    const uint8_t stripes = stripes_for(len);
    rndv_[s] = RndvRecv{};
    rndv_[s].req = r;
    rndv_[s].tag = tag;
    rndv_[s].len = len;
    rndv_[s].reg = e;
    rndv_[s].stripes_left = stripes;
    rndv_[s].used = true;
    it.type = MsgType::kCts;
    it.stripes = stripes;
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

void RdmaEndpoint::reject_rts(uint32_t send_id) {
  if (txq_.full())
    return fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
  TxItem it;
  it.type = MsgType::kReject;
  it.id = send_id;
  txq_.push(it);
}

void RdmaEndpoint::fail(const Status& st, bool orderly) {
  bool pending = false;
  for (const SendSlot& s : sends_) pending |= s.used;
  for (const RndvRecv& rv : rndv_) pending |= rv.used && rv.has_req;
  if (!core_.set_error(st, orderly, pending)) return;
  for (Lane& lane : lanes_) {  // first: nothing may land in buffers released below
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(lane.qp.get(), &a, IBV_QP_STATE);
  }
  reset_staging();
  const Code code = st.code();
  for (uint32_t i = 0; i < sends_.size(); ++i)
    if (sends_[i].used) finish_send(i, code);
  for (uint32_t i = 0; i < rndv_.size(); ++i) {
    RndvRecv& rv = rndv_[i];
    if (!rv.used) continue;
    if (rv.has_req) complete(rv.req.wr_id, rv.tag, 0, Op::kRecv, code);
    if (rv.reg) t_->regcache().release(rv.reg);  // before the core frees a pull's buffer
    rv = RndvRecv{};
  }
  // Kept: whole eager messages (pulled ones that landed became such), and those held in
  // receive buffers (rx_mem_ lives as long as the endpoint). The rest never will be.
  core_.fail_receives(code, [&](int m) {
    const core::InMsg& im = core_.msg(m);
    return orderly && im.dest == core::Dest::kUnexpected && im.complete && !im.claimed;
  });
  if (!orderly) held_.clear();
  txq_.clear();
  ctrl_ = Fd();  // closing it leaves the epoll set
  core_.report_error();
}

}  // namespace gw::drv::rdma
