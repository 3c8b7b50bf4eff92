// RdmaEndpoint: messages that arrive before their receive. Eager ones are copied aside;
// rendezvous requests within rdma.unexpected_bytes are pulled into a bounce buffer at once (CTS
// to it), so the sender's request completes without waiting for the receive, as it does over
// TCP. Beyond the budget the request simply waits for its receive. Bounce buffers come from the
// core's store, which reuses them, and are registered through the cache, which keeps their
// registrations: a steady stream of early arrivals registers nothing.
#include <algorithm>
#include <cstring>
#include <new>

#include "rdma_endpoint.h"

namespace gw::drv::rdma {

uint8_t RdmaEndpoint::stripes_for(uint64_t len) const {
  return static_cast<uint8_t>(std::clamp<uint64_t>(len / t_->opts().min_stripe, 1, lanes_.size()));
}

int RdmaEndpoint::find_unexpected(uint64_t tag) const {
  for (int i = unexp_.head(); i >= 0; i = unexp_.next(i))
    if (tag == kAnyTag || unexp_[i].tag == tag) return i;
  return -1;
}

void RdmaEndpoint::take_unexpected(int u, const RecvRequest& r) {
  Unexpected m = std::move(unexp_[u]);
  unexp_[u] = Unexpected{};
  unexp_.erase(u);
  if (m.rndv != kNoSlot) {
    attach(m.rndv, r);
    return;
  }
  deliver(r, m.type, m.tag, m.len, m.data.p.get(), m.send_id);
  if (m.type == MsgType::kEager) t_->store().give(std::move(m.data), m.len);
}

void RdmaEndpoint::pull(Unexpected& u) {
  if (free_rndv_.empty() || txq_.full()) return;
  core::UBuf buf;
  if (!t_->store().take(u.len, &buf)) return;  // beyond the budget: wait for the receive
  // Through the cache: a buffer the store hands out again is registered already.
  auto reg = t_->regcache().acquire(buf.p.get(), u.len);
  if (!reg.ok()) {  // e.g. the locked-memory limit: wait for the receive instead
    t_->store().give(std::move(buf), u.len);
    return;
  }
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
  it.addr = reinterpret_cast<uintptr_t>(buf.p.get());
  it.rkey = (*reg)->mr->rkey;
  it.stripes = rv.stripes_left;
  rv.bounce = std::move(buf);
  rv.reg = *reg;
  txq_.push(it);
  ++t_->counters_.unexpected_pulls;
  u.rndv = s;
}

void RdmaEndpoint::landed(uint32_t r) {
  RndvRecv& rv = rndv_[r];
  t_->regcache().release(rv.reg);
  rv.reg = nullptr;
  bool kept = false;
  if (!rv.has_req) {  // still unmatched: from now on an eager message with its data
    for (int i = unexp_.head(); i >= 0; i = unexp_.next(i)) {
      Unexpected& u = unexp_[i];
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
    const uint8_t* data = rv.bounce.p.get();
    deliver(req, MsgType::kEager, rv.tag, len, data, 0);
  }
  if (!kept) t_->store().give(std::move(rv.bounce), rv.len);
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
