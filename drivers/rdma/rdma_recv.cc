// RdmaEndpoint's receive side: a message matched against the posted receives (the core's,
// gw_core.h), delivered, buffered as unexpected, or held in its receive buffer when the
// unexpected budget is spent (back-pressure, kept in arrival order).
#include <cstring>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void RdmaEndpoint::hold(const MsgHdr& h, uint32_t slot, uint32_t off) {
  if (held_.empty()) ++counters().held_stalls;
  held_.push(ep_state::Held{h, slot, off});  // never full: one entry per receive buffer at most
}

bool RdmaEndpoint::held_tag(uint64_t tag) {
  for (size_t i = 0; i < held_.size(); ++i)
    if (tag == kAnyTag || held_.at(i).h.tag == tag) return true;
  return false;
}

void RdmaEndpoint::retry_held() {
  while (!held_.empty()) {
    const ep_state::Held hm = held_.front();
    retrying_ = true;
    const bool taken = on_message(hm.h, rx_.at(hm.slot) + hm.off);
    retrying_ = false;
    if (!taken) return;
    held_.pop();
    if (!failed()) rx_.repost(hm.slot);  // its credit goes back to the peer
  }
}

bool RdmaEndpoint::on_message(const MsgHdr& h, const uint8_t* payload) {
  auto type = static_cast<MsgType>(h.type);
  if (type == MsgType::kCts) {
    if (txq_.full()) {
      fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
      return true;
    }
    rndv_.queue_write(h.id, h.id2, h.addr, h.rkey, static_cast<uint8_t>(h.stripes));
    return true;
  }
  if (type == MsgType::kReject) {
    sends_[h.id].awaiting_cts = false;
    finish_send(h.id, Code::kOk);  // delivered; the receiver's buffer was too small
    return true;
  }
  if (type == MsgType::kAdv) {
    adverts_.on_advert(h);
    return true;
  }
  if (type == MsgType::kWin) {
    if (txq_.full()) {
      fail(Status(Code::kInternal, "rdma: send queue of " + peer_name_ + " overflowed"));
      return true;
    }
    sends_[h.id].windowed = true;
    sends_[h.id].win_next = h.tag + h.len;
    rndv_.queue_write(h.id, h.id2, h.addr, h.rkey, 1, h.tag, h.len);
    return true;
  }
  if (!held_.empty() && !retrying_) return false;  // behind a held message: keep the order
  // A new message (eager or rendezvous request): the core matches it in posting order.
  const int m = core_.begin(0, h.tag, h.len, type == MsgType::kRts);
  if (m < 0) return false;  // no room to buffer it: it waits in its receive buffer
  adverts_.matched();
  arrived(m, type, payload, h.id);
  return true;
}

// A compact eager message (no header): matched and, in the common case (a posted host receive
// large enough, not advertised), copied straight in. @return false: hold it.
bool RdmaEndpoint::deliver_eager(uint64_t tag, const uint8_t* payload, uint32_t len) {
  if (!held_.empty()) return false;
  const int m = core_.begin(0, tag, len);
  if (m < 0) return false;
  adverts_.matched();
  core::InMsg& im = core_.msg(m);
  const RecvRequest& r = im.req;
  if (im.dest != core::Dest::kUser || im.cookie != core::kNoCookie ||
      (r.mr && r.mr->kind() == MemKind::kCudaDevice) || t_->staged(r.buf, r.mr)) {
    arrived(m, MsgType::kEager, payload, 0);
    return true;
  }
  if (len) std::memcpy(im.base, payload, len);
  counters().bytes_received += len;
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
    im.drv[1] = ep_state::kNoSlot;
    pulls_.pull(m);
    return;
  }
  if (im.cookie != core::kNoCookie) adverts_.withdraw(im.cookie);  // taken the usual way
  if (im.dest == core::Dest::kDrain) {  // too small: the core completed its receive
    core_.release(m);
    if (type == MsgType::kRts) {  // the sender's request completes: delivered, not taken
      rndv_.reject(send_id);
    }
    return;
  }
  const RecvRequest r = im.req;
  const uint64_t tag = im.tag, len = im.len;
  core_.release(m);
  deliver(r, type, tag, len, payload, send_id);
}

// An arrived message into receive `r`: an eager payload, or a rendezvous request answered.
void RdmaEndpoint::deliver(const RecvRequest& r, MsgType type, uint64_t tag, uint64_t len,
                           const uint8_t* payload, uint32_t send_id) {
  if (type == MsgType::kRts) {
    if (t_->staged(r.buf, r.mr))
      staging_.start_recv(r, tag, len, send_id);
    else
      rndv_.clear_to_send(r, tag, len, send_id);
    return;
  }
  if (len > 0 && (t_->staged(r.buf, r.mr) || (r.mr && r.mr->kind() == MemKind::kCudaDevice))) {
    // The CPU cannot store to device memory: a synchronous copy (small messages only: larger
    // ones come by rendezvous, or were pulled unexpectedly within rdma.unexpected_bytes).
    Status st = t_->stage_ops() ? staging_.copy_to_device(r.buf, payload, len)
                                : Status(Code::kNotSupported, "no device-copy table");
    if (!st.ok()) {
      t_->log_->warn("rdma: {} bytes from {} into CUDA memory: {}", len, peer_name_,
                     st.to_string());
      complete(r.wr_id, tag, len, Op::kRecv, st.code());
      return;
    }
  } else if (len) {
    std::memcpy(r.buf, payload, len);
  }
  t_->core().count_received();
  counters().bytes_received += len;
  complete(r.wr_id, tag, len, Op::kRecv, Code::kOk);
}

bool RdmaEndpoint::copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) {
  took_ = true;
  if (n > 0 && (t_->staged(r.buf, r.mr) || (r.mr && r.mr->kind() == MemKind::kCudaDevice))) {
    // The CPU cannot store to device memory: one synchronous copy (rare path).
    Status st = t_->stage_ops() ? staging_.copy_to_device(r.buf, src, n)
                                : Status(Code::kNotSupported, "no device-copy table");
    if (!st.ok()) {
      fail(st.with_context("rdma: a message from " + peer_name_ + " into CUDA memory"));
      return false;
    }
  } else if (n > 0) {
    std::memcpy(r.buf, src, n);
  }
  counters().bytes_received += n;
  return true;
}

}  // namespace gw::drv::rdma
