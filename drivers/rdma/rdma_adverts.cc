// Receives advertised ahead (rdma_adverts.h).
//
// The only race: messages already under way when the receiver posted. The advertisement
// carries how many eager/RTS messages the receiver had matched (g); the sender keeps its recent
// such messages (index, tag), and the first of them with the tag and index >= g takes the
// advertised receive at the receiver, so the sender drops the advertisement. Whenever the
// sender cannot tell (its record overflowed), it drops the advertisement: an unused one costs
// nothing, since its receive still matches the usual way.
#include "rdma_adverts.h"

#include "rdma_endpoint.h"

namespace gw::drv::rdma {
namespace {
constexpr uint32_t kOrphans = 1024;  // recent eager/RTS messages the sender remembers
bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }
}  // namespace

void Adverts::init(uint32_t max_outstanding) {
  orphans_.init(kOrphans);
  // As many as receives can be posted; the sender holds as many.
  adverts_.init(max_outstanding);
}

void Adverts::offer(int i) {
  RdmaTransport* t = ep_.t_;
  auto& recvs = ep_.core_.recvs();
  const RecvRequest& r = recvs[i].req;
  if (!t->opts().advertise || r.tag == kAnyTag || r.len <= ep_.eager_limit_ ||
      out_ >= t->opts().max_outstanding || ep_.rndv_.full() || ep_.txq_.full())
    return;
  if (t->staged(r.buf, r.mr)) return;  // not registered: its windows are asked for instead
  for (int j = recvs.head(); j >= 0 && j != i; j = recvs.next(j)) {
    const core::Posted& q = recvs[j];
    if ((q.req.tag == r.tag || q.req.tag == kAnyTag) && q.cookie == core::kNoCookie) return;
  }
  if (t->core().find_any(r.tag) >= 0) return;  // an any-source receive posted earlier comes first
  RegCache::Entry* e = region_entry(r.mr);
  if (e) {
    ++e->refs;
  } else {
    auto got = t->regcache().acquire(r.buf, r.len);
    if (!got.ok()) return;  // the usual path reports it if a message comes
    e = *got;
  }
  const uint32_t s = ep_.rndv_.take(r, r.tag, r.len);
  ep_state::RndvRecv& rv = ep_.rndv_.slot(s);
  rv.reg = e;
  rv.stripes_left = ep_.rndv_.stripes_for(r.len);
  rv.has_req = false;  // until a write claims it (the receive stays posted in the core)
  rv.adv_recv = i;
  recvs[i].cookie = s;
  ++out_;
  ep_state::TxItem it;
  it.type = MsgType::kAdv;
  it.tag = r.tag;
  it.len = r.len;
  it.addr = reinterpret_cast<uintptr_t>(r.buf);
  it.rkey = e->mr->rkey;
  it.id = matched_;
  it.id2 = s;
  it.stripes = rv.stripes_left;
  ep_.txq_.push(it);
  ++ep_.counters().adverts_sent;
}

void Adverts::withdraw(uint32_t s) {
  ep_state::RndvRecv& rv = ep_.rndv_.slot(s);
  if (rv.reg) ep_.t_->regcache().release(rv.reg);
  ep_.rndv_.put(s);
  --out_;
}

void Adverts::claim(uint32_t s) {
  ep_state::RndvRecv& rv = ep_.rndv_.slot(s);
  ep_.core_.claim_posted(rv.adv_recv);  // rv.req is the receive: completed when the data is in
  rv.adv_recv = -1;
  rv.has_req = true;
  --out_;
  ++ep_.counters().advert_writes_received;
}

void Adverts::on_advert(const MsgHdr& h) {
  const uint32_t g = h.id;
  ++ep_.counters().adverts_received;
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
    ++ep_.counters().adverts_dropped;
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

bool Adverts::use(uint32_t s, const SendRequest& r, bool rendezvous) {
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
  ep_.rndv_.queue_write(s, a.slot, a.addr, a.rkey, a.stripes);
  ++ep_.counters().advert_writes;
  return true;
}

}  // namespace gw::drv::rdma
