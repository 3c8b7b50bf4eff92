// Recursive doubling allreduce for small messages: ceil(log2 n) exchange steps of the whole
// vector. For n not a power of two, the first 2*(n-p) ranks pair up: even ranks fold their data
// into their odd neighbour before and receive the result after (p = largest power of two <= n).
// Partners reduce in a fixed order (lower new rank's data on the left), so every rank ends with
// the same bytes. Units: 0 = fold-in, 1 + i = exchange with mask 2^i, 1 + log2(p) = fold-out.
#include <algorithm>
#include <cstring>

#include "coll_impl.h"
#include "reduce_kernels.h"

namespace gw {

using coll::Task;

Status Communicator::Impl::rd_setup(Task& op) {
  op.engine = coll::Engine::kRd;
  int p = 1, logp = 0;
  while (p * 2 <= n) {
    p *= 2;
    ++logp;
  }
  const int rem = n - p;
  const int r = rank;
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
  std::array<int, coll::kMaxRdSteps> to, from;
  to.fill(-1);
  from.fill(-1);
  for (int i = 0; i < k; ++i) {
    const auto& s = op.rd[static_cast<size_t>(i)];
    op.sends_total += s.send;
    op.recvs_total += s.recv;
    if (s.send) to[static_cast<size_t>(s.unit)] = s.peer;
    if (s.recv) from[static_cast<size_t>(s.unit)] = s.peer;
  }
  GW_RETURN_IF_ERROR(
      post_headers(op, std::span(to).first(op.units), std::span(from).first(op.units)));
  const size_t bytes = op.count * op.es;
  GW_RETURN_IF_ERROR(op.scratch.ensure(group.transport(), 2 * bytes));
  if (op.work != op.in && bytes) std::memcpy(op.work, op.in, bytes);
  return Status();
}

Status Communicator::Impl::rd_advance(Task& op) {
  const size_t bytes = op.count * op.es;
  // Receives run up to two steps ahead, alternating between the two scratch halves.
  while (op.next_recv < static_cast<uint32_t>(op.rd_steps) &&
         op.next_recv < static_cast<uint32_t>(op.rd_cur) + 2) {
    const auto& s = op.rd[op.next_recv];
    if (s.recv) {
      uint8_t* dst = s.reduce ? op.scratch.data() + (op.next_recv % 2) * bytes : op.work;
      GW_ASSIGN_OR_RETURN(bool took, recv(op, s.peer, dst, bytes, s.unit));
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
      GW_ASSIGN_OR_RETURN(bool took, send(op, s.peer, op.work, bytes, s.unit));
      if (!took) return Status();
      ++op.inflight_sends;
      st |= 4;
    }
    // The reduction rewrites work, so the step's send must have left it first.
    if ((s.send && !(st & 1)) || (s.recv && !(st & 2))) return Status();
    if (s.reduce) {
      const uint8_t* theirs = op.scratch.data() + (cur % 2) * bytes;
      const uint32_t div = s.final && op.rop == ReduceOp::kAvg ? static_cast<uint32_t>(n) : 0;
      coll::reduce(op.dt, op.rop, op.work, s.peer_lower ? theirs : op.work,
                   s.peer_lower ? op.work : theirs, op.count, div);
    }
    ++op.rd_cur;
    if (op.next_recv < static_cast<uint32_t>(op.rd_steps)) return rd_advance(op);
  }
  return Status();
}

Status Communicator::Impl::rd_on_recv(Task& op, uint32_t unit, size_t len) {
  if (unit >= op.units) return Status(Code::kProtocolError, where(op) + ": unknown unit");
  if (len != op.count * op.es) {
    return Status(Code::kInvalidArgument,
                  where(op) + ": a peer sent " + std::to_string(len) + " bytes at step " +
                      std::to_string(unit) + ", this rank expected " +
                      std::to_string(op.count * op.es) +
                      ": the ranks called the collective with different counts or dtypes");
  }
  op.unit_done[unit] |= 2;
  ++op.recvs_done;
  return Status();
}

Status Communicator::Impl::rd_on_send(Task& op, uint32_t unit) {
  if (unit < op.units) op.unit_done[unit] |= 1;
  return Status();
}

}  // namespace gw
