// RdmaEndpoint: receives advertised ahead. A receive posted for a specific tag, larger than the
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

}  // namespace gw::drv::rdma
