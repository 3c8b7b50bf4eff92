// RdmaEndpoint: messages that arrive before their receive. Eager ones are copied aside;
// rendezvous requests within rdma.unexpected_bytes are pulled into a registered bounce
// buffer at once (CTS to it), so the sender's request completes without waiting for the
// receive, as it does over TCP. Beyond the budget the request simply waits for its receive.
#include <algorithm>
#include <cstring>
#include <new>

#include "rdma_endpoint.h"

namespace gw::drv::rdma {

uint8_t RdmaEndpoint::stripes_for(uint64_t len) const {
  return static_cast<uint8_t>(
      std::clamp<uint64_t>(len / t_->opts().min_stripe, 1, lanes_.size()));
}

int RdmaEndpoint::find_unexpected(uint64_t tag) const {
  for (size_t i = 0; i < unexp_.size(); ++i)
    if (tag == kAnyTag || unexp_[i].tag == tag) return static_cast<int>(i);
  return -1;
}

void RdmaEndpoint::take_unexpected(int u, const RecvRequest& r) {
  Unexpected m = std::move(unexp_[static_cast<size_t>(u)]);
  unexp_.erase(unexp_.begin() + u);
  if (m.rndv != kNoSlot) {
    attach(m.rndv, r);
    return;
  }
  if (m.data) t_->unexpected_used_ -= m.len;
  deliver(r, m.type, m.tag, m.len, m.data.get(), m.send_id);
}

void RdmaEndpoint::pull(Unexpected& u) {
  if (t_->unexpected_used_ + u.len > t_->opts().unexpected_bytes || free_rndv_.empty() ||
      txq_.full())
    return;
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[u.len]);
  if (!buf) return;
  MrPtr mr(ibv_reg_mr(t_->pd(), buf.get(), u.len,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!mr) return;  // e.g. the locked-memory limit: wait for the receive instead
  const uint32_t s = free_rndv_.back();
  free_rndv_.pop_back();
  RndvRecv& rv = rndv_[s];
  rv = RndvRecv{};
  rv.tag = u.tag;
  rv.len = u.len;
  rv.stripes_left = stripes_for(u.len);
  rv.used = true;
  rv.has_req = false;
  TxItem it;
  it.type = MsgType::kCts;
  it.id = u.send_id;
  it.id2 = s;
  it.len = u.len;
  it.addr = reinterpret_cast<uintptr_t>(buf.get());
  it.rkey = mr->rkey;
  it.stripes = rv.stripes_left;
  rv.bounce = std::move(buf);
  rv.bounce_mr = std::move(mr);
  txq_.push(it);
  t_->unexpected_used_ += u.len;
  ++t_->counters_.unexpected_pulls;
  u.rndv = s;
}

void RdmaEndpoint::landed(uint32_t r) {
  RndvRecv& rv = rndv_[r];
  rv.bounce_mr.reset();
  bool kept = false;
  if (!rv.has_req) {  // still unmatched: from now on an eager message with its data
    for (Unexpected& u : unexp_) {
      if (u.rndv != r) continue;
      u.rndv = kNoSlot;
      u.type = MsgType::kEager;
      u.data = std::move(rv.bounce);
      kept = true;
      break;
    }
  } else if (!rv.discard) {
    RecvRequest req = rv.req;
    uint64_t len = rv.len;
    const uint8_t* data = rv.bounce.get();
    deliver(req, MsgType::kEager, rv.tag, len, data, 0);
  }
  if (!kept) t_->unexpected_used_ -= rv.len;
  rv = RndvRecv{};
  free_rndv_.push_back(r);
}

void RdmaEndpoint::attach(uint32_t s, const RecvRequest& r) {
  RndvRecv& rv = rndv_[s];
  rv.req = r;
  rv.has_req = true;
  if (rv.len > r.len) {  // too small: fails now, the data is dropped when it lands
    ++t_->counters_.truncated_recvs;
    complete(r.wr_id, rv.tag, rv.len, Op::kRecv, Code::kInvalidArgument);
    rv.discard = true;
  }
}

}  // namespace gw::drv::rdma
