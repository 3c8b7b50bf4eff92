/// @file coll_impl.h
/// Internal state of a Communicator: slots of collectives in flight, their registered scratch
/// buffers, and the ring and recursive-doubling engines that drive them.
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include <array>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gw_coll.h"
#include "gw_staging.h"
#include "gw_transport.h"

namespace gw::coll {

enum class Kind : uint8_t {
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kBroadcast,
  kBarrier,
  kSend,  ///< point-to-point (coll_p2p.cc): not a collective, takes no sequence number
  kRecv,
};
const char* kind_name(Kind k);

/// Signature of a call, sent to peers when coll.check_args is on: mismatched calls fail with
/// a message naming both sides instead of corrupting data or hanging.
struct Desc {
  uint32_t magic = 0;
  uint8_t kind = 0, dtype = 0, op = 0, algo = 0;
  uint8_t device = 0;  ///< 1: device buffers (a rank mixing them with host buffers is caught)
  /// 1: a mismatch relayed (rd_relay): this Desc is rank `origin`'s call and the next one
  /// the call of the rank it disagreed with (its `origin`).
  uint8_t relayed = 0;
  uint16_t origin = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint32_t seq = 0;
  bool operator==(const Desc&) const = default;
};
std::string describe(const Desc& d);

/// A grow-only, registered host buffer: nothing is allocated or registered again once it is
/// big enough.
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

enum class Engine : uint8_t { kNone, kRing, kRd, kP2p, kHier };

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
  bool done = false;
  Status status;

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

  std::array<Desc, kMaxRdSteps> hdr_in{};
};

/// A request's wr_id: its slot, the slot's generation, direction and unit.
inline uint64_t make_wr(uint32_t slot, uint32_t gen, bool is_send, uint32_t unit) {
  return (uint64_t{slot} << 56) | (uint64_t{gen & 0xFFFFFF} << 32) | (uint64_t{is_send} << 31) |
         (unit & 0x7FFFFFFFu);
}

struct Notice;
struct Notices;

/// Unit numbers at or above this carry a descriptor, not data.
inline constexpr uint32_t kHdrUnit = 0x40000000u;
/// Header unit of the descriptor a ring sends backwards (to the previous rank) when it has more
/// than two ranks: with both neighbours checking, every rank of three sees every other's call.
/// Units 0..3 are the forward headers (one per hierarchy phase).
inline constexpr int kBackHdr = 4;

/// Recursive-doubling messages are [Desc, padding | data]: the descriptor rides with the data
/// (one message per step instead of two), and all of them use the tag of header unit 0 — each
/// direction between two ranks carries at most one per collective, and a peer that runs the
/// ring instead meets its own header unit 0, so the mismatch is reported, not waited out.
inline constexpr size_t kRdHdr = 64;
static_assert(sizeof(Desc) <= kRdHdr);

}  // namespace gw::coll

namespace gw {

struct Communicator::Impl {
  static constexpr int kSlots = Communicator::kMaxInFlight;

  Group& group;
  int rank = 0, n = 1;
  size_t chunk_bytes = 0, rd_max_bytes = 0;
  uint32_t depth = 4;
  Nanos timeout{0};
  bool check_args = true;
  bool needs_mr = false;
  size_t device_host_max_bytes = 0;  ///< device allreduces up to this reduce on the host
  // Pinned slots of host-staged device calls (coll_device.cc), one per call in flight.
  std::unique_ptr<StagingPool> dev_stage;
  MemoryRegion dev_stage_mr;
  DeviceBuffer dev_fusion, dev_work;  ///< device ring: fused buckets, reduce-scatter
  uint32_t max_outstanding = 64;
  uint32_t seq = 0;
  Status broken;
  // Hierarchy (coll_hier.cc): ranks of this host, and of this local index on every host.
  bool hier_ok = false;
  std::vector<int> local_ranks, cross_ranks;
  int local_pos = 0, cross_pos = 0;
  std::array<coll::Task, kSlots> ops;
  std::vector<std::pair<std::pair<const void*, size_t>, MemoryRegion>> user_mrs;
  std::array<Completion, 64> comps;

  // Failure notices and abort (coll_notice.cc).
  std::unique_ptr<coll::Notices> notices;
  uint32_t notice_id = 0;  ///< this communicator's, in its notices' wr_ids

  explicit Impl(Group& g);  // both out of line (coll_notice.cc), where Notices is complete
  ~Impl();

  // Setup of one collective (communicator.cc).
  Result<coll::Task*> begin(coll::Kind kind, DataType dt, ReduceOp rop, size_t count,
                            const CallOptions& call);
  /// Post one point-to-point request of `op` (peer -1: receive from any rank).
  /// @return whether the transport took it.
  Result<bool> post_p2p(coll::Task& op, int peer, bool is_send, void* buf, size_t len,
                        uint32_t tag);
  Result<CollHandle> launch(coll::Task& op);
  Status finish_now(coll::Task& op);

  // Posting (coll_post.cc). @return whether the transport took the request.
  /// `unit` names the request in its completion; the tag carries `tag_unit` (default: unit).
  Result<bool> send(coll::Task& op, int peer, const void* buf, size_t len, uint32_t unit,
                    uint32_t tag_unit = ~0u);
  Result<bool> recv(coll::Task& op, int peer, void* buf, size_t len, uint32_t unit,
                    uint32_t tag_unit = ~0u);
  // Bursts (coll_post.cc): one step's requests to one peer in one post call.
  SendRequest send_req(coll::Task& op, const void* buf, size_t len, uint32_t unit,
                       uint32_t tag_unit = ~0u);
  RecvRequest recv_req(coll::Task& op, void* buf, size_t len, uint32_t unit,
                       uint32_t tag_unit = ~0u);
  /// @return how many of `reqs` (a prefix) the transport took.
  Result<size_t> post_sends(coll::Task& op, int peer, std::span<const SendRequest> reqs);
  Result<size_t> post_recvs(coll::Task& op, int peer, std::span<const RecvRequest> reqs);
  /// InvalidArgument naming both calls when `d` (received from `peer`) differs from op's.
  Status check_desc(const coll::Task& op, int peer, const coll::Desc* d, size_t len) const;
  Status post_headers(coll::Task& op, std::span<const int> to, std::span<const int> from);
  const MemoryRegion* mr_for(const coll::Task& op, const void* p, size_t len);

  // Progress and errors (communicator.cc).
  Status poll_once(Nanos wait);
  void dispatch(const Completion& c);
  void fail(coll::Task& op, Status st);
  // Errors shared with every rank (coll_notice.cc).
  /// Break the communicator with `st` (the first error stays) and fail every call in flight;
  /// `tell_peers`: send every peer a failure notice (not when `st` came from one).
  void fail_all(const Status& st, bool tell_peers = true);
  /// A refused post to `peer`: RemoteError naming it when its endpoint has failed (every
  /// driver alike: tcp says RemoteError, rdma Unavailable), else `st` in context.
  Status post_error(const Status& st, int peer, const std::string& what) const;
  /// A peer's request failed: fail with `st` after a short settle time, unless a notice
  /// naming the origin arrives first (a neighbour that quit on a notice closes its
  /// connections about when the origin's notice arrives here).
  void peer_failed(Status st);
  /// Deadlines: the timeout phase (coll_notice.h), then the Timeout naming the culprits;
  /// and the end of a peer failure's settle time.
  void check_deadlines();
  /// Enter the timeout phase: report whom this rank waits on to every peer (once).
  void start_suspect();
  /// Peers with requests of this rank pending (bit r: rank r; ranks below 64).
  uint64_t waiting_mask() const;
  void count_post(int peer, bool is_send);
  void send_notice(int slot, const coll::Notice& m);
  /// Drive progress until this rank's notices are sent, at most 200 ms.
  void flush_notices();
  void request_abort(std::string_view reason);  ///< any thread
  void abort_if_requested();                    ///< the driving thread
  Status advance(coll::Task& op);
  void maybe_complete(coll::Task& op);

  // Engines (coll_ring.cc, coll_rd.cc).
  Status ring_setup(coll::Task& op);
  Status ring_advance(coll::Task& op);
  Status ring_on_recv(coll::Task& op, uint32_t unit, size_t len);
  /// Start a ring of op.rs reduce-scatter and op.ag allgather steps on op's ring geometry.
  Status ring_start(coll::Task& op);
  // Hierarchical allreduce (coll_hier.cc).
  void hier_init();
  Algo auto_algo(size_t bytes) const;
  Status hier_setup(coll::Task& op);
  Status hier_advance(coll::Task& op);
  Status rd_setup(coll::Task& op);
  Status rd_advance(coll::Task& op);
  Status rd_on_recv(coll::Task& op, uint32_t unit, size_t len, int peer);
  Status rd_on_send(coll::Task& op, uint32_t unit);
  /// Pass a call mismatch found at `peer`'s message `d` on to the rest of op's partners.
  void rd_relay(coll::Task& op, const coll::Desc* d, size_t len, int peer);

  int slot_of(const coll::Task& op) const { return static_cast<int>(&op - ops.data()); }
  std::string where(const coll::Task& op) const;
};

}  // namespace gw
