/// @file coll_impl.h
/// Internal state of a Communicator: slots of collectives in flight (coll_task.h) and the
/// ring, recursive-doubling and hierarchical engines that drive them.
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coll_task.h"
#include "flight_recorder.h"
#include "gw_coll.h"
#include "gw_staging.h"
#include "gw_transport.h"
#include "health_server.h"

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

  // Failure notices and abort (coll_notice.cc).
  std::unique_ptr<coll::Notices> notices;
  bool shut = false;       ///< shutdown() ran
  uint32_t notice_id = 0;  ///< this communicator's, in its notices' wr_ids

  /// Every public call holds the transport for its whole length (gw_progress.h): the
  /// progress thread serves the peers only between calls.
  DriveScope drive() { return DriveScope(group.transport().gate()); }
  bool background = false;  ///< this communicator asked for the transport's progress thread

  // Flight recorder (coll_flight.cc): null when coll.flight_records is 0.
  std::unique_ptr<coll::FlightRecorder> flight;
  std::string flight_dir;
  uint32_t flight_sigs = 0;  ///< SIGUSR1s seen (coll::flight_signals())
  /// Per peer: its last completion here (steady ns); read by the health thread too.
  std::unique_ptr<std::atomic<int64_t>[]> heard_ns;
  /// `prev`: the communicator this one succeeds (shrink, grow); its recorder is taken over
  /// when it has the same capacity (no new ring: page faults cost a shrink ~0.5 ms).
  Status flight_init(int64_t records, std::string dir, Impl* prev = nullptr);
  Impl* flight_from = nullptr;  ///< the recorder still to take over from (health_init)
  void adopt_flight() {
    flight = std::move(flight_from->flight);
    flight->restart();
    flight_from = nullptr;
  }
  void flight_start(coll::Task& op);
  /// Records op's end with `st` (once; later calls do nothing).
  void flight_end(coll::Task& op, const Status& st);
  /// A call refused by a broken communicator (begin()'s arguments).
  void flight_refused(coll::Kind kind, DataType dt, ReduceOp rop, size_t count);
  /// The peers of `cs` were heard from now (one clock read per batch).
  void flight_heard(std::span<const Completion> cs);
  /// Writes this rank's dump (`trigger` says why). @return its path.
  Result<std::string> flight_dump(const char* trigger);
  /// A SIGUSR1 came since the last look: dump. Cheap when none did (one relaxed load).
  void flight_poll() {
    if (flight && coll::flight_signals() != flight_sigs) flight_on_signal();
  }
  void flight_on_signal();

  // Health query (coll_health.cc): null when coll.health is off or the recorder is.
  std::unique_ptr<coll::HealthServer> health;
  std::string health_transport, health_job;
  std::atomic<uint64_t> health_waiting{0};  ///< waiting_mask(), published now and then
  uint32_t health_polls = 0;
  std::mutex health_mu;  ///< guards the four below (written rarely, read by queries)
  Status health_broken;
  std::vector<std::pair<std::string, uint64_t>> health_counters;
  std::vector<std::string> health_peer_err;  ///< per peer: its endpoint's error, "" when ok
  int64_t health_counters_ns = 0;            ///< when they were read (0: never)
  /// `prev`: its health thread is taken over (rebound to this communicator's name).
  Status health_init(Impl* prev = nullptr);
  /// The answer to one query (the health thread: atomics, the recorder, the guarded copies,
  /// and the transport only while no call holds it).
  std::string health_answer();
  /// Reads the transport's counters and endpoint errors when nobody drives it (health thread).
  void health_refresh();
  /// coll.metrics_file: this rank's counters as Prometheus text (health thread, every tick).
  void health_write_metrics();
  std::string metrics_path;
  bool metrics_warned = false;
  /// The poll loop's share: the waiting set, at each idle poll (a blocked wait: every
  /// 20 ms) and every 16th busy one.
  void health_poll(bool idle) {
    if (health && (idle || (++health_polls & 15) == 0))
      health_waiting.store(waiting_mask(), std::memory_order_relaxed);
  }
  void health_set_broken(const Status& st);

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
  // Headers held by post_headers(hold): each leaves in the post call of the first data to its
  // peer (coll_post.cc). The engines' sends: send_with_held one at a time; a burst puts
  // held_header() in front and gives the count taken to took_held().
  Result<bool> send_with_held(coll::Task& op, int peer, const void* buf, size_t len, uint32_t unit,
                              uint32_t tag_unit = ~0u);
  /// The held header for `peer` as a request (`*idx`: its place, -1 and false: none).
  bool held_header(coll::Task& op, int peer, SendRequest* r, int* idx);
  /// A burst with held header `idx` in front took `took` requests: @return the data's share.
  size_t took_held(coll::Task& op, int idx, size_t took);
  /// Held headers still waiting go alone. @return false: the transport did not take all.
  Result<bool> send_held(coll::Task& op);
  Result<size_t> post_recvs(coll::Task& op, int peer, std::span<const RecvRequest> reqs);
  /// InvalidArgument naming both calls when `d` (received from `peer`) differs from op's.
  Status check_desc(const coll::Task& op, int peer, const coll::Desc* d, size_t len) const;
  /// `hold`: the sends wait in op.held for the engine to post them with its data.
  Status post_headers(coll::Task& op, std::span<const int> to, std::span<const int> from,
                      bool hold = false);
  const MemoryRegion* mr_for(const coll::Task& op, const void* p, size_t len);

  // Progress and errors (communicator.cc).
  Status poll_once(Nanos wait);
  void dispatch(const Completion& c);
  void fail(coll::Task& op, Status st);
  // Errors shared with every rank (coll_notice.cc).
  /// Break the communicator with `st` (the first error stays) and fail every call in flight;
  /// `tell_peers`: send every peer a failure notice (not when `st` came from one).
  void fail_all(const Status& st, bool tell_peers = true);
  /// Send every peer a failure notice with `st` (once per communicator).
  void tell_failure(const Status& st);
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
  bool abort_if_requested();  ///< the driving thread; true if it carried one out now
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

  // All-to-all, gather, scatter (coll_xchg.cc, coll_bruck.cc): op.xparts filled by the caller.
  Status xchg_setup(coll::Task& op);
  Status xchg_advance(coll::Task& op);
  Status xchg_on_recv(coll::Task& op, uint32_t unit, size_t len, int peer);
  /// Ring-neighbour descriptor headers, as the ring's: any mismatch is seen by two ranks.
  Status post_ring_headers(coll::Task& op, bool hold = false);
  /// Binomial-tree gather/scatter of small host blocks: fills op.xparts, op.xrelay and
  /// op.xfinal for the exchange engine. @return false: not small (the caller goes direct).
  Result<bool> tree_parts(coll::Task& op, bool gather, size_t block);
  Status bruck_setup(coll::Task& op);
  Status bruck_advance(coll::Task& op);
  Status bruck_steps(coll::Task& op);
  Status bruck_on_recv(coll::Task& op, uint32_t unit, size_t len, int peer);

  int slot_of(const coll::Task& op) const { return static_cast<int>(&op - ops.data()); }
  std::string where(const coll::Task& op) const;
};

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
