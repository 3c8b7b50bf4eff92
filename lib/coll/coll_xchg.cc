// Exchange engine (hot path) of alltoall(v), gather and scatter: a list of steps (coll::XPart),
// each one whole part to one peer and one from another. Pairwise alltoall has step i send to
// rank + i and receive from rank - i, so every rank talks to one peer per direction at a time;
// the sends run at most op.xwindow steps ahead of their completions (no incast of n-1 parts at
// once), the receives as far as the transport allows (they only name user memory). Between two
// ranks each direction carries one message per call, so every part uses the tag of unit 0 and
// the completion's unit is the step.
#include <algorithm>
#include <cstring>

#include "coll_impl.h"

namespace gw {

using coll::Task;
using coll::XPart;

Status coll::Poster::ring_headers(Task& op, bool hold) {
  if (im.n < 2) return Status();
  const int next = (im.rank + 1) % im.n, prev = (im.rank + im.n - 1) % im.n;
  int to[coll::kBackHdr + 1] = {next, -1, -1, -1, -1};
  int from[coll::kBackHdr + 1] = {prev, -1, -1, -1, -1};
  size_t k = 1;
  if (im.n > 2) {  // both ways, as the ring's (see kBackHdr)
    to[coll::kBackHdr] = prev;
    from[coll::kBackHdr] = next;
    k = coll::kBackHdr + 1;
  }
  return headers(op, {to, k}, {from, k}, hold);
}

Status coll::xchg::setup(Communicator::Impl& im, Task& op) {
  op.units = static_cast<uint32_t>(op.xparts.size());
  size_t biggest = 1;
  for (const XPart& p : op.xparts) {
    op.sends_total += p.to >= 0;
    op.recvs_total += p.from >= 0;
    biggest = std::max({biggest, p.slen, p.rlen});
  }
  // About depth x chunk_bytes of sends in flight, at least `depth` parts.
  const size_t budget = std::max<size_t>(1, size_t{im.depth} * im.chunk_bytes / biggest);
  op.xwindow = static_cast<uint32_t>(std::clamp<size_t>(budget, im.depth, im.max_outstanding));
  // Zero-length parts point into scratch, which every driver accepts (registered).
  GW_RETURN_IF_ERROR(op.scratch.ensure(im.group.transport(), 64));
  for (XPart& p : op.xparts) {
    if (p.slen == 0) p.src = op.scratch.data();
    if (p.rlen == 0) p.dst = op.scratch.data();
  }
  // Headers leave with the first part to their peer (pairwise: the forward one with step 1);
  // tree relays send only once they received, so theirs go at once.
  return im.poster.ring_headers(op, /*hold=*/!op.xrelay);
}

Status coll::xchg::advance(Communicator::Impl& im, Task& op) {
  while (op.next_recv < op.units && op.inflight_recvs < im.max_outstanding) {
    const XPart& p = op.xparts[op.next_recv];
    if (p.from >= 0) {
      GW_ASSIGN_OR_RETURN(bool took, im.poster.recv(op, p.from, p.dst, p.rlen, op.next_recv, 0));
      if (!took) break;
      ++op.inflight_recvs;
    }
    ++op.next_recv;
  }
  if (op.xrelay && op.recvs_done < op.recvs_total) return Status();  // relays what it gets
  for (auto& c : op.xfinal) {  // the received blocks to their place, once
    if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
    c.bytes = 0;
  }
  while (op.next_send < op.units && op.inflight_sends < op.xwindow) {
    const XPart& p = op.xparts[op.next_send];
    if (p.to >= 0) {
      GW_ASSIGN_OR_RETURN(bool took,
                          im.poster.send_with_held(op, p.to, p.src, p.slen, op.next_send, 0));
      if (!took) break;
      ++op.inflight_sends;
    }
    ++op.next_send;
  }
  // A header whose peer gets no part within the window (gather, scatter, a back header past
  // it) goes alone now, as before; one the transport did not take, at the next advance.
  GW_RETURN_IF_ERROR(im.poster.send_held(op).status());
  return Status();
}

Status coll::xchg::on_recv(Communicator::Impl& im, Task& op, uint32_t unit, size_t len, int peer) {
  if (unit >= op.units) return Status(Code::kProtocolError, im.where(op) + ": unknown unit");
  const XPart& p = op.xparts[unit];
  if (len != p.rlen) {
    return Status(Code::kInvalidArgument,
                  im.where(op) + ": rank " + std::to_string(peer) + " sent " + std::to_string(len) +
                      " bytes, this rank expected " + std::to_string(p.rlen) +
                      ": the ranks called the collective with different counts or dtypes");
  }
  ++op.recvs_done;
  return Status();
}

}  // namespace gw
