// RdmaEndpoint: messages that arrive before their receive, buffered by the core (gw_core.h).
// Eager ones are copied aside; rendezvous requests within rdma.unexpected_bytes are pulled into
// a bounce buffer at once (CTS to it), so the sender's request completes without waiting for
// the receive, as it does over TCP. Beyond the budget the request waits for its receive, which
// answers it (claimed()). Bounce buffers come from the
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

void RdmaEndpoint::pull(int m) {
  core::InMsg& im = core_.msg(m);
  if (free_rndv_.empty() || txq_.full()) return;
  if (!t_->store().take(im.len, &im.ubuf)) return;  // beyond the budget: wait for the receive
  // Through the cache: a buffer the store hands out again is registered already.
  auto reg = t_->regcache().acquire(im.ubuf.p.get(), im.len);
  if (!reg.ok()) {  // e.g. the locked-memory limit: wait for the receive instead
    t_->store().give(std::move(im.ubuf), im.len);
    return;
  }
  im.charged = im.len;
  im.base = im.ubuf.p.get();
  const uint32_t s = free_rndv_.back();
  free_rndv_.pop_back();
  RndvRecv& rv = rndv_[s];
  rv = RndvRecv{};
  rv.tag = im.tag;
  rv.len = im.len;
  rv.stripes_left = stripes_for(im.len);
  rv.used = true;
  rv.has_req = false;  // a receive claims the core's message, not this slot
  rv.msg = m;
  rv.reg = *reg;
  TxItem it;
  it.type = MsgType::kCts;
  it.id = im.drv[0];
  it.id2 = s;
  it.len = im.len;
  it.addr = reinterpret_cast<uintptr_t>(im.base);
  it.rkey = (*reg)->mr->rkey;
  it.stripes = rv.stripes_left;
  txq_.push(it);
  ++t_->counters_.unexpected_pulls;
  im.drv[1] = s;
}

void RdmaEndpoint::landed(uint32_t r) {
  RndvRecv& rv = rndv_[r];
  t_->regcache().release(rv.reg);
  const int m = rv.msg;
  rv = RndvRecv{};
  free_rndv_.push_back(r);
  core_.msg(m).drv[1] = kNoSlot;
  // Claimed: delivered now (copy_unexpected); else it waits whole, as an eager message does.
  core_.finish(m);
  if (!held_.empty()) retry_held();  // its message slot may be what a held message waits for
}

void RdmaEndpoint::claimed(int m) {
  took_ = true;
  core::InMsg& im = core_.msg(m);
  if (im.drv[1] != kNoSlot) return;  // being pulled: delivered when it lands
  const uint32_t send_id = im.drv[0];
  const RecvRequest r = im.req;
  const uint64_t tag = im.tag, len = im.len;
  const bool too_small = im.claim_err;  // its receive completed already
  core_.release(m);
  if (too_small)
    reject_rts(send_id);
  else
    deliver(r, MsgType::kRts, tag, len, nullptr, send_id);
}

bool RdmaEndpoint::copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) {
  took_ = true;
  if (n > 0 && (t_->staged(r.buf, r.mr) || (r.mr && r.mr->kind() == MemKind::kCudaDevice))) {
    // The CPU cannot store to device memory: one synchronous copy (rare path).
    Status st = t_->stage_ops() ? copy_to_device(r.buf, src, n)
                                : Status(Code::kNotSupported, "no device-copy table");
    if (!st.ok()) {
      fail(st.with_context("rdma: a message from " + peer_name_ + " into CUDA memory"));
      return false;
    }
  } else if (n > 0) {
    std::memcpy(r.buf, src, n);
  }
  t_->counters_.bytes_received += n;
  return true;
}

}  // namespace gw::drv::rdma
