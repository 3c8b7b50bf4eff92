/// @file coll_impl.h
/// Internal state of a Communicator: its settings, the slots of collectives in flight
/// (coll_task.h), and the parts that drive them: the Poster (coll_post.h) under the engines
/// (coll_engines.h), Faults (coll_faults.h), the flight recorder (coll_flight.h) and the
/// health query (coll_health.h).
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "coll_engines.h"
#include "coll_faults.h"
#include "coll_flight.h"
#include "coll_health.h"
#include "coll_post.h"
#include "coll_task.h"
#include "gw_coll.h"
#include "gw_staging.h"
#include "gw_transport.h"

namespace gw {

struct Communicator::Impl {
  static constexpr int kSlots = Communicator::kMaxInFlight;

  std::unique_ptr<Group> owned;  ///< a shrunk communicator's group; first: destroyed last
  Group& group;
  CommOptions opts;      ///< as given to create() (shrink passes them on)
  bool drained = false;  ///< shrink() took back every request of this communicator
  int rank = 0, n = 1;
  size_t chunk_bytes = 0, rd_max_bytes = 0;
  uint32_t depth = 4;
  Nanos timeout{0};
  bool check_args = true;
  bool needs_mr = false;
  size_t device_host_max_bytes = 0;  ///< device allreduces up to this reduce on the host
  size_t bruck_max_bytes = 0;        ///< host alltoall blocks up to this use Bruck
  size_t tree_max_bytes = 0;         ///< host gather/scatter blocks up to this use the tree
  // Pinned slots of host-staged device calls (coll_device.cc), one per call in flight.
  std::unique_ptr<StagingPool> dev_stage;
  MemoryRegion dev_stage_mr;
  DeviceBuffer dev_fusion, dev_work;  ///< device ring: fused buckets, reduce-scatter
  uint32_t max_outstanding = 64;
  uint32_t seq = 0;
  uint32_t epoch = 0;       ///< group.epoch(), in every tag
  uint32_t comm_index = 0;  ///< Group::next_comm(): names this communicator's shrink keys
  Status broken;
  // Hierarchy (coll_hier.cc): ranks of this host, and of this local index on every host.
  bool hier_ok = false;
  std::vector<int> local_ranks, cross_ranks;
  int local_pos = 0, cross_pos = 0;
  std::array<coll::Task, kSlots> ops;
  std::vector<std::pair<std::pair<const void*, size_t>, MemoryRegion>> user_mrs;
  std::array<Completion, 64> comps;

  // The parts, in the old fields' order: the health thread (last) goes first on destruction.
  coll::Poster poster{*this};
  coll::Faults faults{*this};
  bool shut = false;  ///< shutdown() ran

  /// Every public call holds the transport for its whole length (gw_progress.h): the
  /// progress thread serves the peers only between calls.
  DriveScope drive() { return DriveScope(group.transport().gate()); }
  bool background = false;  ///< this communicator asked for the transport's progress thread

  coll::Flight flight{*this};
  coll::Health health{*this};

  explicit Impl(Group& g);  // both out of line (coll_notice.cc), where Notices is complete
  ~Impl();
  /// What destruction does before freeing: a pending abort, the settle error, the notices.
  void shutdown();
  /// Requests of this communicator the transport has not completed (per-peer counts, notices).
  uint64_t requests_out() const;
  /// shrink/grow: cancel this communicator's tags and drain its requests (at most 1 s);
  /// `drained` says whether none is left. `me` names the caller in the log.
  void retire(const std::string& me);
  /// A call's requests may still be in the transport (a failed or unfinished call): its
  /// receives, header receives and RDMA reads may still land in this Impl's memory.
  bool transport_holds_requests() const;

  // Setup of one collective (communicator.cc).
  Result<coll::Task*> begin(coll::Kind kind, DataType dt, ReduceOp rop, size_t count,
                            const CallOptions& call);
  Result<CollHandle> launch(coll::Task& op);
  Status finish_now(coll::Task& op);
  // Hierarchical allreduce (coll_hier.cc).
  void hier_init();
  Algo auto_algo(size_t bytes) const;

  // Progress (communicator.cc).
  Status poll_once(Nanos wait);
  void dispatch(const Completion& c);
  Status advance(coll::Task& op);
  void maybe_complete(coll::Task& op);

  int slot_of(const coll::Task& op) const { return static_cast<int>(&op - ops.data()); }
  std::string where(const coll::Task& op) const;
};

inline void coll::Health::poll(bool idle) {
  if (server && (idle || (++polls & 15) == 0))
    waiting.store(im.faults.waiting_mask(), std::memory_order_relaxed);
}

namespace coll {
/// Tags: magic (0xC0 collectives, 0xC1 point-to-point and the device ring, 0xC3 notices), the
/// group's epoch (its shrinks, mod 256: a shrunk communicator's tags never match its
/// parent's), the call's sequence number (mod 2^16; calls run in order) and its low word.
inline uint64_t make_tag(uint64_t magic, uint32_t epoch, uint32_t seq, uint32_t low) {
  return magic << 56 | uint64_t{epoch & 0xFF} << 48 | uint64_t{seq & 0xFFFF} << 32 | low;
}
/// Every tag of one epoch: (tag & kEpochMask) == make_tag(0xC0, epoch, 0, 0).
inline constexpr uint64_t kEpochMask = 0xFCFFull << 48;

/// Argument checks shared by the start calls (coll_api.cc). check_buffers: *device tells
/// whether the buffers are device memory (both must be of one kind).
Status check_buffers(const char* what, size_t count, DataType dt, const void* send,
                     const void* recv, bool* device);
/// In place is NCCL's layout (`in_place`); any other overlap of send and recv is refused.
Status check_overlap(const char* what, const void* send, size_t sbytes, const void* recv,
                     size_t rbytes, bool in_place, const char* layout);

/// Block for a call: the collective's own deadline fails it first, so wait a little longer.
template <class Start>
Status run_blocking(Communicator& c, Nanos timeout, Start start) {
  GW_ASSIGN_OR_RETURN(CollHandle h, start());
  return c.wait(h, timeout + Millis(1000));
}

/// Keeps a destroyed communicator's Impl for the process's life (coll_notice.cc).
void park_impl(std::unique_ptr<Communicator::Impl> im);
}  // namespace coll

}  // namespace gw
