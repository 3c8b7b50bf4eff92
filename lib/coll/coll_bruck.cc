// Bruck's alltoall for small blocks: ceil(log2 n) steps instead of n - 1, each one message to
// rank + 2^k carrying every block whose rotated index has bit k set. The send buffer is first
// rotated (index i holds the block for rank + i), so after the steps index i holds the block
// from rank - i, which the last pass writes to its place. Every step has its own send and
// receive slot in scratch: all receives are posted at the start, and a send never waits for
// an earlier one to leave. Unit k (wire and completion) is step k.
#include <cstring>

#include "coll_impl.h"

namespace gw {

using coll::Task;

namespace {

size_t block(const Task& op) { return op.count * op.es; }
// At most ceil(n / 2) of the n indices have a given bit set.
size_t slot_bytes(const Task& op, int n) { return static_cast<size_t>((n + 1) / 2) * block(op); }
uint8_t* slot(Task& op, int n, int k, bool is_recv) {
  const size_t i = 2 * static_cast<size_t>(k) + is_recv;
  return op.scratch.data() + static_cast<size_t>(n) * block(op) + i * slot_bytes(op, n);
}
size_t moved(int n, int k) {
  size_t m = 0;
  for (int i = 0; i < n; ++i) m += (i >> k) & 1;
  return m;
}
// Copy the blocks of `tmp` whose index has bit k set to `packed` (or back: unpack).
void pack(uint8_t* tmp, uint8_t* packed, int n, int k, size_t b, bool unpack) {
  for (int i = 0; i < n; ++i) {
    if (!((i >> k) & 1)) continue;
    uint8_t* t = tmp + static_cast<size_t>(i) * b;
    unpack ? std::memcpy(t, packed, b) : std::memcpy(packed, t, b);
    packed += b;
  }
}

}  // namespace

Status coll::bruck::setup(Communicator::Impl& im, Task& op) {
  int steps = 0;
  while ((1 << steps) < im.n) ++steps;
  op.rd_steps = steps;
  op.rd_cur = 0;
  op.units = static_cast<uint32_t>(steps);
  op.unit_done.assign(op.units, 0);
  op.sends_total = op.recvs_total = op.units;
  const size_t b = block(op), nb = static_cast<size_t>(im.n);
  GW_RETURN_IF_ERROR(
      op.scratch.ensure(im.group.transport(), nb * b + op.units * 2 * slot_bytes(op, im.n)));
  for (size_t i = 0; i < nb; ++i)  // rotate: index i holds the block for rank + i
    std::memcpy(op.scratch.data() + i * b, op.in + (static_cast<size_t>(im.rank) + i) % nb * b, b);
  return im.poster.ring_headers(op, /*hold=*/true);  // the forward one leaves with step 0's data
}

Status coll::bruck::advance(Communicator::Impl& im, Task& op) {
  GW_RETURN_IF_ERROR(coll::bruck::steps(im, op));
  return im.poster.send_held(op).status();  // the back header, or one the transport did not take
}

Status coll::bruck::steps(Communicator::Impl& im, Task& op) {
  const size_t b = block(op), nb = static_cast<size_t>(im.n);
  while (op.next_recv < op.units && op.inflight_recvs < im.max_outstanding) {
    const int k = static_cast<int>(op.next_recv), from = (im.rank - (1 << k) % im.n + im.n) % im.n;
    GW_ASSIGN_OR_RETURN(bool took, im.poster.recv(op, from, slot(op, im.n, k, true),
                                                  moved(im.n, k) * b, op.next_recv));
    if (!took) break;
    ++op.inflight_recvs;
    ++op.next_recv;
  }
  uint8_t* tmp = op.scratch.data();
  while (op.rd_cur < op.rd_steps) {
    const int k = op.rd_cur;
    uint8_t& st = op.unit_done[static_cast<size_t>(k)];  // 2 received, 4 posted
    if (!(st & 4)) {
      uint8_t* out = slot(op, im.n, k, false);
      pack(tmp, out, im.n, k, b, false);
      GW_ASSIGN_OR_RETURN(bool took,
                          im.poster.send_with_held(op, (im.rank + (1 << k)) % im.n, out,
                                                   moved(im.n, k) * b, static_cast<uint32_t>(k)));
      if (!took) return Status();
      ++op.inflight_sends;
      st |= 4;
    }
    if (!(st & 2)) return Status();
    pack(tmp, slot(op, im.n, k, true), im.n, k, b, true);
    if (++op.rd_cur < op.rd_steps) continue;
    for (size_t i = 0; i < nb; ++i)  // index i came from rank - i
      std::memcpy(op.out + (static_cast<size_t>(im.rank) + nb - i) % nb * b, tmp + i * b, b);
  }
  return Status();
}

Status coll::bruck::on_recv(Communicator::Impl& im, Task& op, uint32_t unit, size_t len, int peer) {
  if (unit >= op.units) return Status(Code::kProtocolError, im.where(op) + ": unknown unit");
  const size_t want = moved(im.n, static_cast<int>(unit)) * block(op);
  if (len != want) {
    return Status(Code::kInvalidArgument,
                  im.where(op) + ": rank " + std::to_string(peer) + " sent " + std::to_string(len) +
                      " bytes at step " + std::to_string(unit) + ", this rank expected " +
                      std::to_string(want) +
                      ": the ranks called the collective with different counts or dtypes");
  }
  op.unit_done[unit] |= 2;
  ++op.recvs_done;
  return Status();
}

}  // namespace gw
