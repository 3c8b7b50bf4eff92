// Pulls (rdma_pulls.h): rendezvous requests answered before their receive, into a bounce
// buffer from the core's store.
#include "rdma_pulls.h"

#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void Pulls::pull(int m) {
  RdmaTransport* t = ep_.t_;
  core::InMsg& im = ep_.core_.msg(m);
  if (ep_.rndv_.full() || ep_.txq_.full()) return;
  if (!t->store().take(im.len, &im.ubuf)) return;  // beyond the budget: wait for the receive
  // Through the cache: a buffer the store hands out again is registered already.
  auto reg = t->regcache().acquire(im.ubuf.p.get(), im.len);
  if (!reg.ok()) {  // e.g. the locked-memory limit: wait for the receive instead
    t->store().give(std::move(im.ubuf), im.len);
    return;
  }
  im.charged = im.len;
  im.base = im.ubuf.p.get();
  const uint32_t s = ep_.rndv_.take();
  ep_state::RndvRecv& rv = ep_.rndv_.slot(s);
  rv.tag = im.tag;
  rv.len = im.len;
  rv.stripes_left = ep_.rndv_.stripes_for(im.len);
  rv.used = true;
  rv.has_req = false;  // a receive claims the core's message, not this slot
  rv.msg = m;
  rv.reg = *reg;
  ep_state::TxItem it;
  it.type = MsgType::kCts;
  it.id = im.drv[0];
  it.id2 = s;
  it.len = im.len;
  it.addr = reinterpret_cast<uintptr_t>(im.base);
  it.rkey = (*reg)->mr->rkey;
  it.stripes = rv.stripes_left;
  ep_.txq_.push(it);
  ++ep_.counters().unexpected_pulls;
  im.drv[1] = s;
}

void Pulls::landed(uint32_t r) {
  ep_state::RndvRecv& rv = ep_.rndv_.slot(r);
  ep_.t_->regcache().release(rv.reg);
  const int m = rv.msg;
  ep_.rndv_.put(r);
  ep_.core_.msg(m).drv[1] = ep_state::kNoSlot;
  // Claimed: delivered now (copy_unexpected); else it waits whole, as an eager message does.
  ep_.core_.finish(m);
  if (!ep_.held_.empty())
    ep_.retry_held();  // its message slot may be what a held message waits for
}

void Pulls::claimed(int m) {
  ep_.took_ = true;
  core::InMsg& im = ep_.core_.msg(m);
  if (im.drv[1] != ep_state::kNoSlot) return;  // being pulled: delivered when it lands
  const uint32_t send_id = im.drv[0];
  const RecvRequest r = im.req;
  const uint64_t tag = im.tag, len = im.len;
  const bool too_small = im.claim_err;  // its receive completed already
  ep_.core_.release(m);
  if (too_small)
    ep_.rndv_.reject(send_id);
  else
    ep_.deliver(r, MsgType::kRts, tag, len, nullptr, send_id);
}

}  // namespace gw::drv::rdma
