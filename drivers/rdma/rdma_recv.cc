// RdmaEndpoint's receive side: receives advertised ahead, and messages that come before their
// receive (below).
//
// Advertised receives: a receive posted for a specific tag, larger than the
// eager limit, is advertised to the peer (its address, key and length) when no earlier receive
// could take a message with that tag: it is then the first in line for that tag, and the next
// eager or RTS message with the tag would match it. A sender with the same-sized message writes
// straight into it (RDMA WRITE with immediate, no RTS/CTS round trip); otherwise its message
// goes the usual way and the receiver withdraws the advertisement when that message matches.
//
// The only race: messages already under way when the receiver posted. The advertisement
// carries how many eager/RTS messages the receiver had matched (g); the sender keeps its recent
// such messages (index, tag), and the first of them with the tag and index >= g takes the
// advertised receive at the receiver, so the sender drops the advertisement. Whenever the
// sender cannot tell (its record overflowed), it drops the advertisement: an unused one costs
// nothing, since its receive still matches the usual way.
#include <algorithm>
#include <cstring>
#include <new>

#include "rdma_endpoint.h"

namespace gw::drv::rdma {
namespace {
constexpr uint32_t kOrphans = 1024;  // recent eager/RTS messages the sender remembers
bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }
}  // namespace

void RdmaEndpoint::init_adverts() {
  orphans_.init(kOrphans);
  // As many as receives can be posted; the sender holds as many.
  adverts_.init(t_->opts().max_outstanding);
}

void RdmaEndpoint::maybe_advertise(int i) {
  auto& recvs = core_.recvs();
  const RecvRequest& r = recvs[i].req;
  if (!t_->opts().advertise || r.tag == kAnyTag || r.len <= eager_limit_ ||
      adverts_out_ >= t_->opts().max_outstanding || free_rndv_.empty() || txq_.full())
    return;
  if (t_->staged(r.buf, r.mr)) return;  // not registered: its windows are asked for instead
  for (int j = recvs.head(); j >= 0 && j != i; j = recvs.next(j)) {
    const core::Posted& q = recvs[j];
    if ((q.req.tag == r.tag || q.req.tag == kAnyTag) && q.cookie == core::kNoCookie) return;
  }
  if (t_->core().find_any(r.tag) >= 0) return;  // an any-source receive posted earlier comes first
  RegCache::Entry* e = region_entry(r.mr);
  if (e) {
    ++e->refs;
  } else {
    auto got = t_->regcache().acquire(r.buf, r.len);
    if (!got.ok()) return;  // the usual path reports it if a message comes
    e = *got;
  }
  const uint32_t s = free_rndv_.back();
  free_rndv_.pop_back();
  RndvRecv& rv = rndv_[s];
  rv = RndvRecv{};
  rv.req = r;
  rv.tag = r.tag;
  rv.len = r.len;
  rv.reg = e;
  rv.stripes_left = stripes_for(r.len);
  rv.used = true;
  rv.has_req = false;  // until a write claims it (the receive stays posted in the core)
  rv.adv_recv = i;
  recvs[i].cookie = s;
  ++adverts_out_;
  TxItem it;
  it.type = MsgType::kAdv;
  it.tag = r.tag;
  it.len = r.len;
  it.addr = reinterpret_cast<uintptr_t>(r.buf);
  it.rkey = e->mr->rkey;
  it.id = matched_;
  it.id2 = s;
  it.stripes = rv.stripes_left;
  txq_.push(it);
  ++t_->counters_.adverts_sent;
}

void RdmaEndpoint::unadvertise(uint32_t s) {
  RndvRecv& rv = rndv_[s];
  if (rv.reg) t_->regcache().release(rv.reg);
  rv = RndvRecv{};
  free_rndv_.push_back(s);
  --adverts_out_;
}

bool RdmaEndpoint::claim_by_write(uint32_t s) {
  RndvRecv& rv = rndv_[s];
  core_.claim_posted(rv.adv_recv);  // rv.req is the receive: completed when the data is in
  rv.adv_recv = -1;
  rv.has_req = true;
  --adverts_out_;
  ++t_->counters_.advert_writes_received;
  return true;
}

void RdmaEndpoint::on_advert(const MsgHdr& h) {
  const uint32_t g = h.id;
  ++t_->counters_.adverts_received;
  // Messages queued before the receive was posted were matched before it existed.
  while (!orphans_.empty() && before(orphans_.front().index, g)) orphans_.pop();
  bool usable = !(orphans_lost_ && before(g, orphan_floor_));
  if (usable) {
    // The first message of this tag still under way takes it at the receiver.
    for (size_t k = 0; k < orphans_.size(); ++k) {
      Orphan& o = orphans_.at(k);
      if (!o.claimed && o.tag == h.tag) {
        o.claimed = true;
        usable = false;
        break;
      }
    }
  }
  if (!usable || adverts_.full()) {
    ++t_->counters_.adverts_dropped;
    return;
  }
  Advert a;
  a.tag = h.tag;
  a.len = h.len;
  a.addr = h.addr;
  a.rkey = h.rkey;
  a.slot = h.id2;
  a.stripes = static_cast<uint8_t>(h.stripes);
  adverts_.push(a);
}

bool RdmaEndpoint::use_advert(uint32_t s, const SendRequest& r, bool rendezvous) {
  // The first live advertisement of this tag is this message's receive, whichever way it goes.
  Advert a;
  bool found = false;
  for (size_t k = 0; k < adverts_.size(); ++k) {
    Advert& x = adverts_.at(k);
    if (!x.dead && x.tag == r.tag) {
      a = x;
      x.dead = true;
      found = true;
      break;
    }
  }
  while (!adverts_.empty() && adverts_.front().dead) adverts_.pop();
  if (!found || !rendezvous || a.len != r.len) {
    if (found)
      ++queued_;
    else
      under_way(r.tag);
    return false;
  }
  queue_write(s, a.slot, a.addr, a.rkey, a.stripes);
  ++t_->counters_.advert_writes;
  return true;
}

// RdmaEndpoint: messages that arrive before their receive, buffered by the core (gw_core.h).
// Eager ones are copied aside; rendezvous requests within rdma.unexpected_bytes are pulled into
// a bounce buffer at once (CTS to it), so the sender's request completes without waiting for
// the receive, as it does over TCP. Beyond the budget the request waits for its receive, which
// answers it (claimed()). Bounce buffers come from the
// core's store, which reuses them, and are registered through the cache, which keeps their
// registrations: a steady stream of early arrivals registers nothing.

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
