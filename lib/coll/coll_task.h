/// @file coll_task.h
/// One collective in flight (Task) and what it is made of: the registered scratch buffers,
/// the exchange and recursive-doubling steps. The call descriptor and the wire's unit
/// numbering: coll_desc.h.
#pragma once

#include <array>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "coll_desc.h"
#include "gw_coll.h"
#include "gw_transport.h"

namespace gw::coll {

/// A grow-only, registered host buffer: nothing is allocated or registered again once big enough.
class RegBuf {
 public:
  Status ensure(Transport& t, size_t bytes);
  uint8_t* data() const { return mem_.get(); }
  const MemoryRegion* mr() const { return &mr_; }
  bool contains(const void* p, size_t n) const { return cap_ && mr_.contains(p, n); }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem_;
  size_t cap_ = 0;
  MemoryRegion mr_;
};

enum class Engine : uint8_t { kNone, kRing, kRd, kP2p, kHier, kXchg, kBruck };

/// One step of the exchange engine (coll_xchg.cc): a message to `to` and one from `from`
/// (-1: none), each a whole part; zero-length parts are sent too, so a mismatch is seen.
struct XPart {
  int to = -1, from = -1;
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  size_t slen = 0, rlen = 0;
};

/// One step of recursive doubling (including the fold-in/fold-out of the ranks beyond the
/// largest power of two).
struct RdStep {
  int unit = 0;  ///< numbered alike on every rank (0 fold-in, 1+i mask 2^i, 1+log2 p fold-out)
  int peer = -1;
  bool send = false, recv = false;
  bool reduce = false;      ///< recv goes to scratch and is reduced into work
  bool peer_lower = false;  ///< the peer's data is the left operand (fixed order)
  bool final = false;       ///< last reduction: apply the avg divisor
};
inline constexpr int kMaxRdSteps = 72;

/// One collective in flight.
struct Task {
  // Identity.
  bool active = false;
  uint32_t gen = 0;
  uint32_t seq = 0;
  Kind kind = Kind::kAllreduce;
  Engine engine = Engine::kNone;
  DataType dt = DataType::kFloat32;
  ReduceOp rop = ReduceOp::kSum;
  Algo algo = Algo::kRing;
  int root = 0;
  size_t count = 0;  ///< elements of the whole vector
  size_t es = 1;
  Desc desc;
  Deadline deadline{Nanos(0)};
  Clock::time_point started{};  ///< when begin() set it up
  bool done = false;
  Status status;
  uint64_t flight_id = 0;  ///< its flight record (flight_recorder.h), 0: none or ended

  // Buffers.
  const uint8_t* in = nullptr;  ///< this rank's contribution (whole vector)
  uint8_t* work = nullptr;      ///< where partial and final results live
  uint8_t* out = nullptr;       ///< user output (reduce_scatter: one block)
  RegBuf scratch, workbuf, fusion;
  std::vector<TensorRef> bucket;  ///< fused allreduce: unpacked from `fusion` at the end
  bool device = false;            ///< the caller's buffers are device memory (coll_device*.cc)
  uint8_t* dev_out = nullptr;     ///< host-staged device call: copy `work` here when done
  int stage_slot = -1;            ///< its pinned slot in Impl::dev_stage
  std::array<MemoryRegion, 2> dev_mrs;  ///< the device ring's work and scratch registrations
  int* source = nullptr;                ///< point-to-point receive: where the sender's rank goes
  size_t* received = nullptr;           ///< point-to-point receive: where the message length goes

  // Progress counters.
  uint32_t units = 0, sends_total = 0, recvs_total = 0;
  uint32_t next_send = 0, next_recv = 0, sends_done = 0, recvs_done = 0;
  uint32_t inflight_sends = 0, inflight_recvs = 0;
  uint32_t hdr_pending = 0;
  std::vector<uint8_t> unit_done;
  /// Descriptor-header sends held back to leave in one post call with the first data message
  /// to their peer (one writev on tcp: a small alltoall paid a message each way for them).
  struct HeldHdr {
    int peer = -1;
    uint32_t unit = 0;
  };
  std::array<HeldHdr, 2> held{};
  uint32_t nheld = 0;

  // Ring geometry: a ring over `ring_n` ranks (ring_ranks[i], or rank i when null) on the
  // elements [ring_off, ring_off + ring_count) of the vector, this rank's input in ring_in.
  const int* ring_ranks = nullptr;
  int ring_n = 1, ring_pos = 0;
  size_t ring_off = 0, ring_count = 0;
  const uint8_t* ring_in = nullptr;
  uint32_t avg_div = 0;     ///< kAvg divisor at the last reduce-scatter step (0: none)
  uint32_t unit_base = 0;   ///< added to units on the wire: hierarchy phases apart
  int phase = 0;            ///< hierarchical: 0 intra-host, 1 across hosts, 2 intra-host, 3 done
  size_t chunk = 1;         ///< elements per chunk
  uint32_t C = 1;           ///< chunks per segment
  uint32_t rs = 0, ag = 0;  ///< steps of the reduce-scatter and allgather phases
  uint32_t depth = 1;

  // Recursive doubling.
  std::array<RdStep, kMaxRdSteps> rd{};
  int rd_steps = 0, rd_cur = 0, rd_left = 0;
  std::array<Desc, kMaxRdSteps> hdr_in{};  ///< descriptor headers received

  // Exchange engine: its steps (capacity reused), and the sends allowed in flight.
  std::vector<XPart> xparts;
  uint32_t xwindow = 1;
  /// Tree relays (coll_tree.cc): sends wait for every receive, then up to two copies
  /// (dst, src, bytes) put the received blocks in place.
  bool xrelay = false;
  struct Copy {
    uint8_t* dst = nullptr;
    const uint8_t* src = nullptr;
    size_t bytes = 0;
  };
  std::array<Copy, 2> xfinal{};
};

/// A request's wr_id: its slot, the slot's generation, direction and unit.
inline uint64_t make_wr(uint32_t slot, uint32_t gen, bool is_send, uint32_t unit) {
  return (uint64_t{slot} << 56) | (uint64_t{gen & 0xFFFFFF} << 32) | (uint64_t{is_send} << 31) |
         (unit & 0x7FFFFFFFu);
}

struct Notice;
struct Notices;  // coll_notice.h

}  // namespace gw::coll
