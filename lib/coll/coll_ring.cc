// Ring engine (hot path): reduce-scatter then allgather, each rank's segment cut into chunks
// that are pipelined — chunk k of step s+1 is sent as soon as chunk k of step s is reduced,
// while later chunks are still on the wire. Broadcast is the same pipeline along a chain.
// Unit u = step * C + chunk numbers every message of a collective; both sides derive the same
// numbering, and the tag carries (sequence number, unit).
#include <algorithm>
#include <array>
#include <cstring>

#include "coll_device.h"
#include "coll_impl.h"
#include "reduce_kernels.h"

namespace gw {
namespace {

constexpr size_t kRingBurst = 16;  // requests per post call (max_outstanding is at most 64)

/// After the transport took `took` of a burst of *k (units[i]: request i's unit): on a short
/// take, step *next back to the first refused unit and forget the refused ones in flight.
/// Empties the burst. @return whether all were taken.
bool settle_burst(size_t took, size_t* k, const uint32_t* units, uint32_t* next,
                  uint32_t* inflight) {
  const bool all = took == *k;
  if (!all) {
    *next = units[took];
    *inflight -= static_cast<uint32_t>(*k - took);
  }
  *k = 0;
  return all;
}

using coll::Kind;
using coll::Task;

struct UnitIo {
  bool send = false, recv = false, reduce = false, scratch = false;
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;     // receive target
  size_t off = 0, len = 0;    // elements of the chunk received (recv) ...
  size_t soff = 0, slen = 0;  // ... and sent
  int64_t dep = -1;           // unit whose completion the send waits for
  uint32_t step = 0, chunk = 0;
};

int mod(int a, int n) { return ((a % n) + n) % n; }

// Chunk k of segment x of the ring's part: [off, off + len) in elements of the whole vector.
void chunk_of(const Task& op, int n, int x, uint32_t k, size_t* off, size_t* len) {
  size_t seg_off = op.ring_off, seg_len = op.ring_count;
  if (op.kind != Kind::kBroadcast) {
    const size_t base = seg_len / static_cast<size_t>(n), rem = seg_len % static_cast<size_t>(n);
    const auto ux = static_cast<size_t>(x);
    seg_off += ux * base + std::min(ux, rem);
    seg_len = base + (ux < rem ? 1 : 0);
  }
  const size_t b = std::min(seg_len, size_t{k} * op.chunk);
  *off = seg_off + b;
  *len = std::min(seg_len - b, op.chunk);
}

// Peer at ring position `pos`.
int ring_peer(const Task& op, int pos) {
  pos = mod(pos, op.ring_n);
  return op.ring_ranks ? op.ring_ranks[pos] : pos;
}

UnitIo unit_io(const Task& op, uint32_t u) {
  const int n = op.ring_n, r = op.ring_pos;
  UnitIo io;
  io.step = u / op.C;
  io.chunk = u % op.C;
  if (op.kind == Kind::kBroadcast) {
    const int d = mod(r - op.root, n);
    chunk_of(op, n, 0, io.chunk, &io.off, &io.len);
    io.soff = io.off;
    io.slen = io.len;
    io.send = d < n - 1;
    io.recv = d > 0;
    io.src = op.work + io.off * op.es;
    io.dst = op.work + io.off * op.es;
    io.dep = d > 0 ? int64_t{u} : -1;
    return io;
  }
  io.send = io.recv = true;
  const int s = static_cast<int>(io.step);
  if (io.step < op.rs) {  // reduce-scatter: send segment r-s-1, receive and reduce r-s-2
    chunk_of(op, n, mod(r - s - 1, n), io.chunk, &io.soff, &io.slen);
    chunk_of(op, n, mod(r - s - 2, n), io.chunk, &io.off, &io.len);
    io.src = (s == 0 ? op.ring_in : op.work) + io.soff * op.es;
    io.dep = s == 0 ? -1 : int64_t{u} - op.C;
    io.reduce = io.scratch = true;
    io.dst = op.scratch.data() + size_t{u % op.depth} * op.chunk * op.es;
    return io;
  }
  const int a = s - static_cast<int>(op.rs);  // allgather: send segment r-a, receive r-a-1
  chunk_of(op, n, mod(r - a, n), io.chunk, &io.soff, &io.slen);
  chunk_of(op, n, mod(r - a - 1, n), io.chunk, &io.off, &io.len);
  io.src = op.work + io.soff * op.es;
  io.dst = op.work + io.off * op.es;
  io.dep = a > 0 ? int64_t{u} - op.C : (op.rs ? int64_t{op.rs - 1} * op.C + io.chunk : -1);
  return io;
}

}  // namespace

Status coll::ring::setup(Communicator::Impl& im, Task& op) {
  op.engine = coll::Engine::kRing;
  op.ring_ranks = nullptr;
  op.ring_n = im.n;
  op.ring_pos = im.rank;
  op.ring_off = 0;
  op.ring_count = op.count;
  op.ring_in = op.in;
  op.avg_div = static_cast<uint32_t>(im.n);
  op.unit_base = 0;
  op.phase = 0;
  const bool has_rs = op.kind == Kind::kAllreduce || op.kind == Kind::kReduceScatter;
  const bool has_ag = op.kind == Kind::kAllreduce || op.kind == Kind::kAllgather;
  op.rs = has_rs ? static_cast<uint32_t>(im.n - 1) : 0;
  op.ag = has_ag ? static_cast<uint32_t>(im.n - 1) : 0;
  return coll::ring::start(im, op);
}

Status coll::ring::start(Communicator::Impl& im, Task& op) {
  const int rn = op.ring_n;
  op.chunk = std::max<size_t>(1, im.chunk_bytes / op.es);
  const size_t seg_max = op.kind == Kind::kBroadcast
                             ? op.ring_count
                             : (op.ring_count + static_cast<size_t>(rn) - 1) / rn;
  op.C = static_cast<uint32_t>(std::max<size_t>(1, (seg_max + op.chunk - 1) / op.chunk));
  op.depth = im.depth;
  op.next_send = op.next_recv = 0;
  const int next = ring_peer(op, op.ring_pos + 1), prev = ring_peer(op, op.ring_pos - 1);
  int to[coll::kBackHdr + 1] = {-1, -1, -1, -1, -1};  // descriptor headers (per phase)
  int from[coll::kBackHdr + 1] = {-1, -1, -1, -1, -1};
  size_t k = 0;
  if (op.kind == Kind::kBroadcast) {
    const int d = mod(im.rank - op.root, im.n);
    op.units = op.C;
    op.sends_total = d < im.n - 1 ? op.C : 0;
    op.recvs_total = d > 0 ? op.C : 0;
    // Headers go both ways around the ring, not only down the chain: every rank (the root
    // and the last too) then checks a neighbour's call, so a mismatch fails them all.
    to[0] = next;
    from[0] = prev;
    k = 1;
  } else {
    op.units = (op.rs + op.ag) * op.C;
    op.sends_total += op.units;
    op.recvs_total += op.units;
    // Header unit = phase: each phase of a hierarchical allreduce checks its own ring.
    to[op.phase] = next;
    from[op.phase] = prev;
    k = static_cast<size_t>(op.phase) + 1;
  }
  if (op.kind == Kind::kBroadcast ? im.n > 2 : op.phase == 0 && rn > 2) {  // see kBackHdr
    to[coll::kBackHdr] = prev;
    from[coll::kBackHdr] = next;
    k = coll::kBackHdr + 1;
  }
  GW_RETURN_IF_ERROR(im.poster.headers(op, {to, k}, {from, k}, /*hold=*/true));
  op.unit_done.assign(op.units, 0);  // reuses capacity: no allocation for a repeated size
  if (op.rs) {
    GW_RETURN_IF_ERROR(
        op.scratch.ensure(im.group.transport(), size_t{op.depth} * op.chunk * op.es));
  }
  if (op.kind == Kind::kAllgather) {
    size_t off, len;
    chunk_of(op, im.n, op.ring_pos, 0, &off, &len);
    const size_t block = op.count / static_cast<size_t>(im.n);
    if (op.work + off * op.es != op.in && block) {
      if (op.device)
        GW_RETURN_IF_ERROR(coll::copy_sync(op.work + off * op.es, op.in, block * op.es));
      else
        std::memcpy(op.work + off * op.es, op.in, block * op.es);
    }
  }
  return Status();
}

Status coll::ring::advance(Communicator::Impl& im, Task& op) {
  const int next = ring_peer(op, op.ring_pos + 1), prev = ring_peer(op, op.ring_pos - 1);
  // The units this call can post go out as one burst per direction (at a collective's start
  // that is up to max_outstanding chunks: one post call instead of one each); the first burst
  // to `next` carries the held descriptor header in front (sreq[0]).
  std::array<SendRequest, kRingBurst + 1> sreq;
  std::array<RecvRequest, kRingBurst> rreq;
  std::array<uint32_t, kRingBurst> units;
  size_t k = 0;
  auto flush_sends = [&]() -> Result<bool> {
    int h;
    const size_t first = im.poster.held_header(op, next, &sreq[0], &h) ? 0 : 1;
    GW_ASSIGN_OR_RETURN(size_t took,
                        im.poster.sends(op, next, {sreq.data() + first, k + 1 - first}));
    return settle_burst(im.poster.took_held(op, h, took), &k, units.data(), &op.next_send,
                        &op.inflight_sends);
  };
  while (op.next_send < op.units && op.inflight_sends < im.max_outstanding) {
    const UnitIo io = unit_io(op, op.next_send);
    if (io.send) {
      if (io.dep >= 0 && !op.unit_done[static_cast<size_t>(io.dep)]) break;
      // Reduce-scatter sends run at most `depth` units ahead of this rank's own receives: the
      // next rank posts a scratch slot only as fast as this one does, and a chunk sent before
      // its slot is posted is buffered and copied once more by the transport.
      const uint32_t u = op.next_send;
      if (io.scratch && u >= op.depth && !op.unit_done[u - op.depth]) break;
      units[k] = u;
      sreq[1 + k++] = im.poster.send_req(op, io.src, io.slen * op.es, op.unit_base + u);
      ++op.inflight_sends;
    }
    ++op.next_send;
    if (k == kRingBurst) {
      GW_ASSIGN_OR_RETURN(bool all, flush_sends());
      if (!all) break;
    }
  }
  if (k > 0) GW_RETURN_IF_ERROR(flush_sends().status());
  GW_RETURN_IF_ERROR(im.poster.send_held(op).status());  // a header with no data to go with now
  auto flush_recvs = [&]() -> Result<bool> {
    GW_ASSIGN_OR_RETURN(size_t took, im.poster.recvs(op, prev, {rreq.data(), k}));
    return settle_burst(took, &k, units.data(), &op.next_recv, &op.inflight_recvs);
  };
  while (op.next_recv < op.units && op.inflight_recvs < im.max_outstanding) {
    const UnitIo io = unit_io(op, op.next_recv);
    if (io.recv) {
      // A scratch slot is reused by unit u + depth once unit u is reduced.
      if (io.scratch && op.next_recv >= op.depth && !op.unit_done[op.next_recv - op.depth]) break;
      units[k] = op.next_recv;
      rreq[k++] = im.poster.recv_req(op, io.dst, io.len * op.es, op.unit_base + op.next_recv);
      ++op.inflight_recvs;
    }
    ++op.next_recv;
    if (k == kRingBurst) {
      GW_ASSIGN_OR_RETURN(bool all, flush_recvs());
      if (!all) break;
    }
  }
  if (k > 0) GW_RETURN_IF_ERROR(flush_recvs().status());
  return Status();
}

Status coll::ring::on_recv(Communicator::Impl& im, Task& op, uint32_t unit, size_t len) {
  unit -= op.unit_base;  // wraps to a huge value for a unit of another phase: rejected below
  if (unit >= op.units) return Status(Code::kProtocolError, im.where(op) + ": unknown unit");
  const UnitIo io = unit_io(op, unit);
  if (len != io.len * op.es) {
    return Status(Code::kInvalidArgument,
                  im.where(op) + ": rank " + std::to_string(ring_peer(op, op.ring_pos - 1)) +
                      " sent " + std::to_string(len) + " bytes for chunk " +
                      std::to_string(io.chunk) + " of step " + std::to_string(io.step) +
                      ", this rank expected " + std::to_string(io.len * op.es) +
                      ": the ranks called the collective with different counts or dtypes");
  }
  if (io.reduce) {
    const bool last = io.step + 1 == op.rs;
    uint8_t* dst = op.work + io.off * op.es;
    if (last && op.kind == Kind::kReduceScatter) {
      const size_t block = op.count / static_cast<size_t>(im.n);
      dst = op.out + (io.off - block * static_cast<size_t>(op.ring_pos)) * op.es;
    }
    const uint32_t div = last && op.rop == ReduceOp::kAvg ? op.avg_div : 0;
    coll::reduce(op.dt, op.rop, dst, op.ring_in + io.off * op.es, io.dst, io.len, div);
  }
  op.unit_done[unit] = 1;
  ++op.recvs_done;
  return Status();
}

}  // namespace gw
