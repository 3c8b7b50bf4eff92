// Rendezvous (rdma_rndv.h): the receiver's CTS and landing stripes, the sender's striped
// RDMA WRITEs.
#include "rdma_rndv.h"

#include <arpa/inet.h>

#include <algorithm>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void Rendezvous::init(uint32_t slots) {
  slots_.resize(slots);
  for (uint32_t i = slots; i-- > 0;) free_.push_back(i);
}

uint8_t Rendezvous::stripes_for(uint64_t len) const {
  return static_cast<uint8_t>(
      std::clamp<uint64_t>(len / ep_.t_->opts().min_stripe, 1, ep_.lanes_.size()));
}

void Rendezvous::clear_to_send(const RecvRequest& r, uint64_t tag, uint64_t len, uint32_t send_id) {
  RdmaTransport* t = ep_.t_;
  TxItem it;
  it.id = send_id;
  RegCache::Entry* e = region_entry(r.mr);
  if (e) {
    ++e->refs;
  } else {
    auto got = t->regcache().acquire(r.buf, len);
    if (!got.ok()) {
      t->log_->warn("{}", got.status().to_string());
      ep_.complete(r.wr_id, tag, 0, Op::kRecv, got.status().code());
      it.type = MsgType::kReject;
      ep_.txq_.push(it);
      return;
    }
    e = *got;
  }
  if (full()) {
    ep_.fail(Status(Code::kInternal, "rdma: out of rendezvous slots toward " + ep_.peer_name()));
    return;
  }
  const uint32_t s = take(r, tag, len);
  // Stripes of at least rdma.min_stripe_bytes, one per lane at most.
  const uint8_t stripes = stripes_for(len);
  RndvRecv& rv = slots_[s];
  rv.reg = e;
  rv.stripes_left = stripes;
  it.type = MsgType::kCts;
  it.stripes = stripes;
  it.id2 = s;
  it.len = len;
  it.addr = reinterpret_cast<uintptr_t>(r.buf);
  it.rkey = e->mr->rkey;
  if (ep_.txq_.full()) {
    ep_.fail(Status(Code::kInternal, "rdma: send queue of " + ep_.peer_name() + " overflowed"));
    return;
  }
  ep_.txq_.push(it);
}

void Rendezvous::reject(uint32_t send_id) {
  if (ep_.txq_.full())
    return ep_.fail(
        Status(Code::kInternal, "rdma: send queue of " + ep_.peer_name() + " overflowed"));
  TxItem it;
  it.type = MsgType::kReject;
  it.id = send_id;
  ep_.txq_.push(it);
}

bool Rendezvous::on_write_imm(uint32_t imm) {
  uint32_t r = imm & kImmSlotMask;
  if (r < size() && slots_[r].used && slots_[r].staged) return ep_.staging_.window_landed(r);
  if (r >= size() || !slots_[r].used || slots_[r].stripes_left == 0) {
    ep_.fail(ep_.protocol_error("RDMA WRITE for receive slot " + std::to_string(r) +
                                ", which is not waiting for one"));
    return false;
  }
  RndvRecv& rv = slots_[r];
  if (rv.adv_recv >= 0) {  // the first stripe of a write into an advertised receive
    if (ep_.core_.recvs()[rv.adv_recv].cookie != r) {
      ep_.fail(ep_.protocol_error("RDMA WRITE into advertised slot " + std::to_string(r) +
                                  ", which a message already took"));
      return false;
    }
    ep_.adverts_.claim(r);
  }
  if (--rv.stripes_left > 0) return true;
  if (rv.msg >= 0) {
    ep_.pulls_.landed(r);
    return true;
  }
  ep_.t_->core().count_received();
  ep_.counters().bytes_received += rv.len;
  ep_.complete(rv.req.wr_id, rv.tag, rv.len, Op::kRecv, Code::kOk);
  if (rv.reg) ep_.t_->regcache().release(rv.reg);
  put(r);
  return true;
}

void Rendezvous::queue_write(uint32_t s, uint32_t rslot, uint64_t addr, uint32_t rkey,
                             uint8_t stripes, uint64_t base, uint64_t len) {
  ep_state::SendSlot& slot = ep_.sends_[s];
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
  if (stripes > 1) ++ep_.counters().striped_sends;
  ep_.txq_.push(it);
}

// Stripe i covers [i*per, (i+1)*per) and goes over lane i, in chunks of
// rdma.write_chunk_bytes; its last chunk carries the immediate. Only lane 0's immediate
// uses a receive buffer that needs a credit.
bool Rendezvous::post_write(TxItem& it) {
  ep_state::SendSlot& s = ep_.sends_[it.id];
  const uint64_t chunk_max = ep_.t_->opts().write_chunk;
  const uint64_t per = (it.len + it.stripes - 1) / it.stripes;
  if (!it.started) {
    for (uint32_t i = 0; i < it.stripes; ++i) s.off[i] = s.copied[i] = it.base + i * per;
    it.started = true;
  }
  if (s.staged) return ep_.staging_.post_write(it);
  bool all = true;
  for (uint32_t i = 0; i < it.stripes; ++i) {
    const uint64_t end = it.base + std::min<uint64_t>(it.len, (i + 1) * per);
    while (s.off[i] < end) {
      const uint64_t chunk = std::min(chunk_max, end - s.off[i]);
      const bool last = s.off[i] + chunk == end;
      if (!ep_.lanes_.room(i)) {
        all = false;
        break;
      }
      if (last && i == 0 && ep_.credits_.available() <= 0) {
        ++ep_.counters().credit_stalls;
        all = false;
        break;
      }
      ibv_send_wr wr{};
      wr.wr_id = make_wr(last ? WrKind::kWriteImm : WrKind::kWrite, ep_.id_, (i << 24) | it.id);
      wr.num_sge = 1;
      wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
      wr.imm_data = htonl(it.id2);
      wr.wr.rdma.remote_addr = it.addr + (s.off[i] - it.base);
      wr.wr.rdma.rkey = it.rkey;
      ep_.lanes_.stage(i, wr,
                       ibv_sge{reinterpret_cast<uintptr_t>(s.req.buf) + s.off[i],
                               static_cast<uint32_t>(chunk), s.lkey},
                       false, last);
      s.off[i] += chunk;
      if (last && i == 0) ep_.credits_.sent();
    }
  }
  return all;
}

void Rendezvous::stripe_written(uint32_t s) {
  auto& sends = ep_.sends_;
  if (s >= sends.size() || !sends[s].used || sends[s].stripes_left == 0) return;
  ep_state::SendSlot& slot = sends[s];
  // A windowed send is done once the receiver asked for its last byte and that was written.
  if (--slot.stripes_left > 0 || (slot.windowed && slot.win_next < slot.req.len)) return;
  ++ep_.counters().rndv_sent;
  if (slot.staged) ++ep_.counters().staged_sends;
  ep_.finish_send(s, Code::kOk);
}

}  // namespace gw::drv::rdma
