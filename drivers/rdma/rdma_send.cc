// RdmaEndpoint: sending, through its lanes' chains (rdma_lanes.h). Receive buffers are reposted
// together at the start of a flush, before any header can advertise them as credits: when a poll
// finds nothing (so reposting is not between a message and the caller's answer), or at once when
// the peer may be down to a quarter of its credits. send_now() is the short way for the common
// eager send.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void RdmaEndpoint::post_recvs() {
  if (rx_.staged() == 0 || lanes_.empty()) return;
  uint32_t n = 0;
  const int rc = rx_.post(lanes_.qp(0), &n);
  if (rc != 0) return fail_verbs("ibv_post_recv", 0, rc);
  credits_.posted(n);
}

// An empty receive on a data lane: consumed by one stripe's WRITE with immediate.
void RdmaEndpoint::repost_lane(uint32_t lane) {
  ibv_recv_wr wr{};
  wr.wr_id = make_wr(WrKind::kLaneRecv, id_, lane);
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(lanes_.qp(lane), &wr, &bad);
  if (rc != 0) fail_verbs("ibv_post_recv", lane, rc);
}

// Verbs call `call` on queue pair `lane` returned `rc`. Out of line and cold, so the posting
// functions stay small.
void RdmaEndpoint::fail_verbs(const char* call, uint32_t lane, int rc) {
  fail(Status(Code::kSystemError,
              std::string("rdma: ") + call + " on queue pair " + std::to_string(lane) + " toward " +
                  peer_name_,
              rc));
}

// Send slot `s` (a compact eager message in registered memory, key `lkey`) as one signalled
// SEND with immediate from the caller's buffer; it completes with that SEND.
void RdmaEndpoint::stage_compact(uint32_t s, uint32_t lkey) {
  const SendRequest& r = sends_[s].req;
  ibv_send_wr& w = lanes_.next_wr(
      0, ibv_sge{reinterpret_cast<uintptr_t>(r.buf), static_cast<uint32_t>(r.len), lkey}, false,
      true);
  w.wr_id = make_wr(WrKind::kZeroCopy, id_, s);
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.imm_data = htonl(static_cast<uint32_t>(r.tag));
  credits_.sent();
  ++counters().eager_sent;
  ++counters().zero_copy_sends;
}

// The common eager send: a compact message (rdma_wire.h), nothing queued before it, credit and
// room at hand. Within the inline limit it needs no send slot or transmit buffer and completes
// now; above it, from registered memory, it goes from the caller's buffer and completes with
// its SEND. @return false to take the queued path (copy into a transmit buffer).
bool RdmaEndpoint::send_now(const SendRequest& r) {
  if (r.len > eager_limit_ || (r.tag >> 32) != tx_tag_hi_ || !txq_.empty() || !lanes_.room(0) ||
      credits_.available() <= Credits::kCtrl || r.tag == kAnyTag || (r.buf == nullptr && r.len > 0))
    return false;
  if (r.mr && (!r.mr->contains(r.buf, r.len) || r.mr->kind() == MemKind::kCudaDevice))
    return false;  // check_send's error, or GPUDirect memory (always rendezvous)
  if (t_->staged(r.buf, r.mr)) return false;
  const bool inl = r.len <= max_inline_;
  RegCache::Entry* e = inl ? nullptr : region_entry(r.mr);
  if (!inl && (!e || free_sends_.empty())) return false;  // copied into a transmit buffer
  adverts_.eager(r);
  if (!inl) {  // straight from the caller's buffer: done when its SEND completes
    const uint32_t s = free_sends_.back();
    free_sends_.pop_back();
    SendSlot& slot = sends_[s];  // what finish_send and the CTS checks read
    slot.req = r;
    slot.reg = nullptr;
    slot.stripes_left = 0;
    slot.awaiting_cts = slot.staged = slot.windowed = false;
    slot.used = true;
    stage_compact(s, e->mr->lkey);
    return true;
  }
  ibv_send_wr& w = lanes_.next_wr(
      0, ibv_sge{reinterpret_cast<uintptr_t>(r.buf), static_cast<uint32_t>(r.len), 0}, false,
      false);
  w.wr_id = make_wr(WrKind::kMsg, id_, 0);
  w.num_sge = r.len > 0 ? 1 : 0;
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.imm_data = htonl(static_cast<uint32_t>(r.tag));
  w.send_flags |= IBV_SEND_INLINE;  // the device copies the bytes when it is posted
  credits_.sent();
  auto& c = counters();
  ++c.eager_sent;
  ++c.msgs_sent;
  c.bytes_sent += r.len;
  ++c.inline_sends;
  complete(r.wr_id, r.tag, r.len, Op::kSend, Code::kOk);
  return true;
}

// The message's bytes (header unless compact, eager payload) into transmit buffer `buf`.
// @return their length; ~0 when a staged copy failed (the endpoint failed). Inlined into
// post_msg, its only caller.
[[gnu::always_inline]] inline size_t RdmaEndpoint::fill_msg(const TxItem& it, bool compact,
                                                            uint8_t* buf) {
  size_t total = 0;
  if (!compact) {
    MsgHdr h;
    h.type = static_cast<uint8_t>(it.type);
    h.stripes = it.stripes;
    h.posted = credits_.posted();
    h.id = it.id;
    h.id2 = it.id2;
    h.tag = it.tag;
    h.len = it.len;
    h.addr = it.addr;
    h.rkey = it.rkey;
    std::memcpy(buf, &h, sizeof h);
    total = sizeof h;
    if (it.type == MsgType::kEager || it.type == MsgType::kRts)
      tx_tag_hi_ = static_cast<uint32_t>(it.tag >> 32);
  }
  if (it.type != MsgType::kEager) return total;
  const SendSlot& s = sends_[it.id];
  if (it.len && s.staged) {  // small CUDA message: a synchronous copy into the buffer
    Status st = staging_.copy_out(buf + total, s.req.buf, it.len);
    if (!st.ok()) {
      fail(st.with_context("rdma: staging a send to " + peer_name_));
      return ~size_t{0};
    }
  } else if (it.len) {
    std::memcpy(buf + total, s.req.buf, it.len);
  }
  return total + it.len;
}

bool RdmaEndpoint::post_msg(const TxItem& it) {
  if (!lanes_.room(0) || tx_.empty()) return false;
  // Eager and RTS messages leave Credits::kCtrl: the receiver may hold them (back-pressure),
  // and its answers (CTS, windows, adverts) must still find receive buffers.
  const bool data = it.type == MsgType::kEager || it.type == MsgType::kRts;
  if (credits_.available() <= (data ? Credits::kCtrl : 0)) {
    ++counters().credit_stalls;
    return false;
  }
  const uint32_t slot = tx_.next();
  uint8_t* buf = tx_.at(slot);
  const bool compact = it.type == MsgType::kEager && (it.tag >> 32) == tx_tag_hi_;
  if (compact && it.len > max_inline_) {
    // Registered memory goes out as it is: no copy; the send completes with its SEND.
    const SendSlot& s = sends_[it.id];
    RegCache::Entry* e = s.staged ? nullptr : region_entry(s.req.mr);
    if (e) {
      stage_compact(it.id, e->mr->lkey);
      return true;
    }
  }
  const size_t total = fill_msg(it, compact, buf);
  if (total == ~size_t{0}) return false;
  ibv_send_wr wr{};
  wr.wr_id = make_wr(WrKind::kMsg, id_, slot);
  wr.num_sge = total > 0 ? 1 : 0;
  wr.opcode = compact ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = compact ? htonl(static_cast<uint32_t>(it.tag)) : 0;
  if (total <= max_inline_) {
    wr.send_flags = IBV_SEND_INLINE;
    ++counters().inline_sends;
  }
  lanes_.stage(0, wr,
               ibv_sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(total), tx_.lkey()},
               true, false);
  tx_.take();
  credits_.sent();
  if (!compact) credits_.told();
  if (it.type == MsgType::kEager) {
    ++counters().eager_sent;
    finish_send(it.id, Code::kOk);  // the payload is copied: the caller's buffer is free
  }
  return true;
}

void RdmaEndpoint::post_credit() {
  if (!lanes_.room(0)) return;
  ibv_send_wr wr{};
  wr.wr_id = make_wr(WrKind::kCredit, id_, 0);
  wr.send_flags = max_inline_ >= 4 ? IBV_SEND_INLINE : 0;
  const ibv_sge sge = credits_.write(&wr);
  lanes_.stage(0, wr, sge, false, false);
  ++counters().credit_writes;
  credits_.told();
}

void RdmaEndpoint::flush() {
  if (failed() || lanes_.empty()) return;
  if (staging_.pending()) staging_.poll();
  if (failed()) return;
  post_recvs();  // first: the headers below may advertise these buffers
  while (!failed() && !txq_.empty()) {
    TxItem& it = txq_.front();
    if (!(it.write ? rndv_.post_write(it) : post_msg(it))) break;
    if (failed()) return;
    txq_.pop();
  }
  if (!failed() && credit_due()) post_credit();
  for (uint32_t l = 0; l < lanes_.size() && !failed(); ++l) lanes_.post(l);
  if (staging_.active()) staging_.update_busy();
}

}  // namespace gw::drv::rdma
