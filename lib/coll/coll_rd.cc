// Recursive doubling allreduce for small messages: ceil(log2 n) exchange steps of the whole
// vector. For n not a power of two, the first 2*(n-p) ranks pair up: even ranks fold their data
// into their odd neighbour before and receive the result after (p = largest power of two <= n).
// Partners reduce in a fixed order (lower new rank's data on the left), so every rank ends with
// the same bytes. Units: 0 = fold-in, 1 + i = exchange with mask 2^i, 1 + log2(p) = fold-out.
// Each message is [descriptor | data] sent from a copy (see kRdHdr): the descriptor check costs
// no extra message, and the reduction need not wait for the send to leave the work buffer.
#include <algorithm>
#include <cstring>

#include "coll_impl.h"
#include "reduce_kernels.h"

namespace gw {

using coll::kRdHdr;
using coll::Task;

namespace {
size_t rd_slot(const Task& op) { return (kRdHdr + op.count * op.es + 63) / 64 * 64; }
// Slot i: receive slots 0 and 1 alternate by step, send slots 2 and 3 likewise.
uint8_t* rd_buf(Task& op, size_t i) { return op.scratch.data() + i * rd_slot(op); }
}  // namespace

Status coll::rd::setup(Communicator::Impl& im, Task& op) {
  op.engine = coll::Engine::kRd;
  int p = 1, logp = 0;
  while (p * 2 <= im.n) {
    p *= 2;
    ++logp;
  }
  const int rem = im.n - p;
  const int r = im.rank;
  const int newrank = r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem;
  int k = 0;
  auto add = [&](int unit, coll::RdStep s) {
    s.unit = unit;
    op.rd[static_cast<size_t>(k++)] = s;
  };
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      add(0, {.peer = r + 1, .send = true});
    } else {
      add(0, {.peer = r - 1, .recv = true, .reduce = true, .peer_lower = true});
    }
  }
  if (newrank >= 0) {
    for (int i = 0, mask = 1; mask < p; ++i, mask <<= 1) {
      const int pn = newrank ^ mask;
      const int peer = pn < rem ? pn * 2 + 1 : pn + rem;
      add(1 + i, {.peer = peer,
                  .send = true,
                  .recv = true,
                  .reduce = true,
                  .peer_lower = pn < newrank,
                  .final = mask * 2 == p});
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      add(1 + logp, {.peer = r + 1, .recv = true});
    } else {
      add(1 + logp, {.peer = r - 1, .send = true});
    }
  }
  op.rd_steps = k;
  op.rd_cur = 0;
  op.units = static_cast<uint32_t>(2 + logp);
  op.unit_done.assign(op.units, 0);
  for (int i = 0; i < k; ++i) {
    const auto& s = op.rd[static_cast<size_t>(i)];
    op.sends_total += s.send;
    op.recvs_total += s.recv;
  }
  // Scratch: two receive slots, then two send slots (each kRdHdr + data), then rd::relay's.
  GW_RETURN_IF_ERROR(op.scratch.ensure(im.group.transport(), 4 * rd_slot(op) + kRdHdr));
  const size_t bytes = op.count * op.es;
  if (op.work != op.in && bytes) std::memcpy(op.work, op.in, bytes);
  return Status();
}

Status coll::rd::advance(Communicator::Impl& im, Task& op) {
  const size_t bytes = op.count * op.es, len = kRdHdr + bytes;
  // Receives run up to two steps ahead, alternating between the two receive slots.
  while (op.next_recv < static_cast<uint32_t>(op.rd_steps) &&
         op.next_recv < static_cast<uint32_t>(op.rd_cur) + 2) {
    const auto& s = op.rd[op.next_recv];
    if (s.recv) {
      GW_ASSIGN_OR_RETURN(bool took, im.poster.recv(op, s.peer, rd_buf(op, op.next_recv % 2), len,
                                                    s.unit, coll::kHdrUnit));
      if (!took) break;
      ++op.inflight_recvs;
    }
    ++op.next_recv;
  }
  while (op.rd_cur < op.rd_steps) {
    const auto cur = static_cast<size_t>(op.rd_cur);
    const auto& s = op.rd[cur];
    uint8_t& st = op.unit_done[static_cast<size_t>(s.unit)];  // 1 sent, 2 received, 4 posted
    if (s.send && !(st & 4)) {
      // The send slot is free once the send two steps back (same slot) has left.
      if (cur >= 2 && op.rd[cur - 2].send && !(op.unit_done[op.rd[cur - 2].unit] & 1))
        return Status();
      uint8_t* out = rd_buf(op, 2 + cur % 2);
      std::memcpy(out, &op.desc, sizeof(op.desc));
      if (bytes) std::memcpy(out + kRdHdr, op.work, bytes);
      GW_ASSIGN_OR_RETURN(bool took, im.poster.send(op, s.peer, out, len, s.unit, coll::kHdrUnit));
      if (!took) return Status();
      ++op.inflight_sends;
      st |= 4;
    }
    // Work was copied out with the send, so only the receive gates the reduction.
    if (s.recv && !(st & 2)) return Status();
    const uint8_t* theirs = rd_buf(op, cur % 2) + kRdHdr;
    if (s.reduce) {
      const uint32_t div = s.final && op.rop == ReduceOp::kAvg ? static_cast<uint32_t>(im.n) : 0;
      coll::reduce(op.dt, op.rop, op.work, s.peer_lower ? theirs : op.work,
                   s.peer_lower ? op.work : theirs, op.count, div);
    } else if (s.recv && bytes) {
      std::memcpy(op.work, theirs, bytes);  // fold-out: the partner's final result
    }
    ++op.rd_cur;
    if (op.next_recv < static_cast<uint32_t>(op.rd_steps)) return coll::rd::advance(im, op);
  }
  return Status();
}

Status coll::rd::on_recv(Communicator::Impl& im, Task& op, uint32_t unit, size_t len, int peer) {
  if (unit >= op.units) return Status(Code::kProtocolError, im.where(op) + ": unknown unit");
  size_t idx = 0;
  while (idx < static_cast<size_t>(op.rd_steps) && op.rd[idx].unit != static_cast<int>(unit)) ++idx;
  const auto* d = reinterpret_cast<const coll::Desc*>(rd_buf(op, idx % 2));
  if (im.check_args || len < sizeof(coll::Desc)) {
    if (Status st = im.poster.check_desc(op, peer, d, len); !st.ok()) {
      coll::rd::relay(im, op, d, len, peer);
      return st;
    }
  }
  if (len != kRdHdr + op.count * op.es) {
    return Status(Code::kInvalidArgument,
                  im.where(op) + ": rank " + std::to_string(peer) + " sent " + std::to_string(len) +
                      " bytes at step " + std::to_string(unit) + ", this rank expected " +
                      std::to_string(kRdHdr + op.count * op.es) +
                      ": the ranks called the collective with different counts or dtypes");
  }
  op.unit_done[unit] |= 2;
  ++op.recvs_done;
  return Status();
}

// The ranks that meet this one only at later steps would wait for data that never comes: send
// them, in place of that data, both calls of the mismatch found here (or relayed to here), and
// they fail with it and pass it on in turn, so every rank fails at once.
void coll::rd::relay(Communicator::Impl& im, Task& op, const coll::Desc* d, size_t len, int peer) {
  coll::Desc pair[2];
  if (len >= sizeof pair && d->magic == op.desc.magic && d->relayed) {
    std::memcpy(pair, d, sizeof pair);
  } else {
    pair[0] = op.desc;
    pair[0].relayed = 1;
    pair[0].origin = static_cast<uint16_t>(im.rank);
    if (len >= sizeof(coll::Desc)) std::memcpy(&pair[1], d, sizeof(coll::Desc));
    pair[1].origin = static_cast<uint16_t>(peer);
  }
  uint8_t* buf = op.scratch.data() + 4 * rd_slot(op);
  std::memcpy(buf, pair, sizeof pair);
  for (int i = op.rd_cur; i < op.rd_steps; ++i) {
    const coll::RdStep& s = op.rd[static_cast<size_t>(i)];
    uint8_t& st = op.unit_done[static_cast<size_t>(s.unit)];
    if (!s.send || (st & 4)) continue;
    (void)im.poster.send(op, s.peer, buf, sizeof pair, static_cast<uint32_t>(s.unit),
                         coll::kHdrUnit);
    st |= 4;
  }
}

Status coll::rd::on_send(Communicator::Impl& /*im*/, Task& op, uint32_t unit) {
  if (unit < op.units) op.unit_done[unit] |= 1;
  return Status();
}

}  // namespace gw
