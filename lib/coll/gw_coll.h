/// @file gw_coll.h
/// Collectives over a Group: allreduce (pipelined ring, or recursive doubling for small
/// messages), reduce-scatter, allgather, broadcast, barrier, all-to-all(v) (pairwise exchange,
/// or Bruck's log-step algorithm for small blocks), gather, scatter (direct, or a binomial
/// tree for small blocks). Every call can be started
/// asynchronously and waited on later; several tensors can be reduced in one call (a fused
/// bucket, as DDP and Horovod do).
///
/// Every rank must start the same collectives in the same order with the same counts, dtypes
/// and ops (as with NCCL and Gloo), and all with host or all with device (CUDA) buffers; a
/// mismatch is detected and reported as InvalidArgument on every rank (with two or three
/// ranks always; with more, the ranks that exchange data with a mismatching one).
///
/// Device buffers are accepted by every collective and by send/recv (lib/coll/coll_device.h):
/// the Group's transport moves them (GPUDirect) or stages them through pinned host memory. A
/// call on device buffers is finished (wait() returns) only once its results are in device
/// memory (copies and kernels done), so a barrier after it orders device state as well; the
/// barrier itself takes no buffers.
/// After an error (a failed peer, a timeout, a mismatch, an abort) the communicator is broken:
/// every later call returns that first error. Go on with shrink() (the survivors, over the
/// same connections), or destroy it (before its Group) and build a new Group. Keep the buffers of
/// the call that failed (and of calls still in flight) until that Group is destroyed: its transport
/// may still hold receives posted into them, and a peer's transfer under way may still land (an
/// RDMA write needs no help from this rank) -- as NCCL asks for ncclCommAbort before such buffers
/// are freed.
///
/// Failures reach every rank, naming the culprit (lib/coll/coll_notice.h): a rank that breaks
/// on its own sends every peer a failure notice (origin rank, code, reason) over the
/// transport; a rank broken by a notice reports the notice's culprit, not the rank that told
/// it. The culprit is a field, Status::rank() (-1 when unknown): the dead peer (RemoteError),
/// the aborting rank (Aborted), the stopped peer (Timeout). At a deadline a rank does not fail
/// at once: the ranks that are still alive tell each other whom they wait on for a grace of
/// timeout/4 (0.1 s to 0.5 s), then each names the ranks waited on that said nothing — so
/// a Timeout comes at most 0.5 s after the deadline and names the stopped rank on every
/// survivor.
///
/// Contract (tests/coll/test_coll_contract.cc):
/// - In place, as NCCL: allreduce send == recv; reduce-scatter recv == send + rank * recv_count
///   (the rank's own block); allgather send == recv + rank * send_count; on the root, gather
///   send == recv + root * count and scatter recv == send + root * count (MPI_IN_PLACE's
///   layout); alltoall(v) has none. Any other overlap of send and recv is InvalidArgument on
///   the calling rank, before anything is sent.
/// - Integer sum and prod wrap modulo 2^bits; kAvg wraps the sum first, then divides once by
///   the number of ranks, truncating toward zero (int32: 2 x INT32_MAX averages to -1).
/// - fp16 and bf16: every reduction step adds in float32 and rounds (to nearest even) to the
///   narrow type, as NCCL does: up to ranks - 1 roundings, and every rank gets the same bits.
/// - wait() (and test(), progress()) drives every call in flight, not only its own: handles
///   may be waited on in any order, by each rank in its own order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gw_coll_types.h"
#include "gw_group.h"
#include "gw_status.h"
#include "gw_time.h"
#include "gw_transport.h"

namespace gw {

/// Settings of a communicator; a zero/negative value takes the [coll] configuration key.
struct CommOptions {
  int64_t chunk_bytes = 0;     ///< ring pipeline chunk (coll.chunk_bytes)
  int64_t pipeline_depth = 0;  ///< chunks in flight per ring step (coll.pipeline_depth)
  int64_t rd_max_bytes =
      -1;               ///< Algo::kAuto uses recursive doubling up to this (coll.rd_max_bytes)
  Nanos timeout{0};     ///< default timeout of one collective (coll.timeout_ms)
  int check_args = -1;  ///< 1: exchange a descriptor to catch mismatched calls (coll.check_args)
  /// Device-buffer allreduce of at most this many bytes reduces on the host after one copy
  /// (coll.device_host_max_bytes; negative: the key).
  int64_t device_host_max_bytes = -1;
  /// alltoall blocks of at most this many bytes use Bruck's algorithm, larger ones pairwise
  /// exchange (coll.alltoall_bruck_max_bytes; negative: the key).
  int64_t alltoall_bruck_max_bytes = -1;
  /// Host gather/scatter blocks of at most this many bytes go through a binomial tree on 3+
  /// ranks, larger ones straight between root and rank (coll.gather_tree_max_bytes; negative:
  /// the key).
  int64_t gather_tree_max_bytes = -1;
  /// Calls kept by the flight recorder (coll.flight_records; negative: the key; 0: off).
  int64_t flight_records = -1;
  /// Where dumps go (coll.flight_dir; empty: the key).
  std::string flight_dir;
};

/// One call of the flight record (docs/failures.md), as Communicator::flight_records() gives.
struct FlightRecord {
  uint32_t seq = 0;     ///< collective sequence number (0: point-to-point)
  const char* op = "";  ///< "allreduce", "broadcast", "send", ...
  DataType dt = DataType::kUInt8;
  size_t count = 0;        ///< elements as passed (bytes for send/recv)
  int root = 0;            ///< root, or the peer of send/recv
  const char* state = "";  ///< "running", "ok", "failed", "timed_out", "aborted"
  Code code = Code::kOk;
};

/// Settings of Communicator::shrink.
struct ShrinkOptions {
  /// How long the survivors wait for a rank that neither calls shrink nor is known to have
  /// failed; it is excluded then (coll.shrink_wait_ms; zero: the key).
  Nanos wait{0};
};

/// Per-call settings.
struct CallOptions {
  Algo algo = Algo::kAuto;  ///< allreduce only
  Nanos timeout{0};         ///< 0: the communicator's default
};

/// One tensor of a fused allreduce bucket. send may equal recv (in place).
struct TensorRef {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
};

/// A started collective; pass it to wait() exactly once.
struct CollHandle {
  uint32_t slot = ~0u;
  uint32_t gen = 0;
};

/// Thread-safety: like the Group's Transport, one thread at a time. Progress is made inside
/// wait(), test() and progress(); a trainer overlapping compute calls progress() now and then.
/// The communicator uses the Group's endpoints and CQ with its own tags; it must be destroyed
/// before the Group.
class Communicator {
 public:
  /// @return InvalidArgument (bad option or configuration value).
  static Result<std::unique_ptr<Communicator>> create(Group& group, const CommOptions& opts = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// Most calls (collectives and point-to-point) in flight at once; more: ResourceExhausted.
  static constexpr int kMaxInFlight = 16;

  int rank() const;
  int size() const;

  /// recv = op over ranks of send (count elements each). send == recv is in place.
  /// Errors of all calls: InvalidArgument (bad argument, or a peer called with other
  /// arguments), RemoteError (a peer failed; the message names its rank), Timeout,
  /// ResourceExhausted (too many collectives in flight), and a broken communicator's error.
  Result<CollHandle> allreduce_async(const void* send, void* recv, size_t count, DataType dt,
                                     ReduceOp op, const CallOptions& call = {});
  /// Fused bucket: every tensor reduced as if by its own allreduce, in one collective.
  Result<CollHandle> allreduce_async(std::span<const TensorRef> bucket, DataType dt, ReduceOp op,
                                     const CallOptions& call = {});
  /// send holds size() * recv_count elements; rank r receives the reduced block r.
  Result<CollHandle> reduce_scatter_async(const void* send, void* recv, size_t recv_count,
                                          DataType dt, ReduceOp op, const CallOptions& call = {});
  /// recv (size() * send_count elements) gets every rank's send block in rank order.
  Result<CollHandle> allgather_async(const void* send, void* recv, size_t send_count, DataType dt,
                                     const CallOptions& call = {});
  /// buf of `root` is copied to buf of every rank.
  Result<CollHandle> broadcast_async(void* buf, size_t count, DataType dt, int root,
                                     const CallOptions& call = {});
  Result<CollHandle> barrier_async(const CallOptions& call = {});
  /// send holds size() blocks of `count` elements: block j goes to rank j, and recv block i
  /// (of the same layout) comes from rank i. send and recv must not overlap. A part larger
  /// than the transport's max_message_size is InvalidArgument.
  Result<CollHandle> alltoall_async(const void* send, void* recv, size_t count, DataType dt,
                                    const CallOptions& call = {});
  /// MPI_Alltoallv: send_counts[j] elements at send + send_displs[j] go to rank j; recv_counts[i]
  /// elements from rank i land at recv + recv_displs[i] (counts and displacements in elements,
  /// each array size() long; zero-length parts allowed). send_counts[j] on this rank must equal
  /// recv_counts[this rank] on rank j (else InvalidArgument, or Timeout when a rank waits for a
  /// part that never comes). The arrays are copied: they may be freed when the call returns.
  Result<CollHandle> alltoallv_async(const void* send, const size_t* send_counts,
                                     const size_t* send_displs, void* recv,
                                     const size_t* recv_counts, const size_t* recv_displs,
                                     DataType dt, const CallOptions& call = {});
  /// recv of `root` (size() * count elements) gets every rank's send block in rank order;
  /// recv is not used on other ranks (may be null).
  Result<CollHandle> gather_async(const void* send, void* recv, size_t count, DataType dt, int root,
                                  const CallOptions& call = {});
  /// send of `root` (size() * count elements) is cut into blocks, block r to rank r's recv;
  /// send is not used on other ranks (may be null).
  Result<CollHandle> scatter_async(const void* send, void* recv, size_t count, DataType dt,
                                   int root, const CallOptions& call = {});

  /// Point-to-point (not a collective: only the two ranks take part, the collectives'
  /// order is untouched): send `bytes` of buf to rank `peer`. It matches the receive on
  /// `peer` with the same `tag`, in posting order. Tags are the caller's own.
  Result<CollHandle> send_async(const void* buf, size_t bytes, int peer, uint32_t tag,
                                const CallOptions& call = {});
  /// Receive at most `bytes` into buf from rank `peer` (-1: any rank) with `tag`; when it
  /// finishes, *source (if given) holds the sender's rank and *received (if given) the
  /// message's length. A longer message fails only this receive (InvalidArgument, *received =
  /// its length; nothing is written past buf) and the communicator stays usable; a failed
  /// peer or a deadline breaks it as a collective's would.
  Result<CollHandle> recv_async(void* buf, size_t bytes, int peer, uint32_t tag,
                                int* source = nullptr, size_t* received = nullptr,
                                const CallOptions& call = {});

  /// Drive progress until the collective finishes or `timeout` passes. After Timeout from
  /// wait() the collective keeps running (its own deadline still applies); wait again.
  /// @return the collective's status; Timeout; InvalidArgument for an unknown handle.
  Status wait(CollHandle h, Nanos timeout);
  /// Make progress without blocking. @return whether `h` is finished (then wait() returns
  /// at once).
  Result<bool> test(CollHandle h);
  /// Make progress on everything in flight without blocking.
  Status progress();

  /// Blocking forms: start, then wait for the call's timeout.
  Status allreduce(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                   const CallOptions& call = {});
  Status allreduce(std::span<const TensorRef> bucket, DataType dt, ReduceOp op,
                   const CallOptions& call = {});
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dt, ReduceOp op,
                        const CallOptions& call = {});
  Status allgather(const void* send, void* recv, size_t send_count, DataType dt,
                   const CallOptions& call = {});
  Status broadcast(void* buf, size_t count, DataType dt, int root, const CallOptions& call = {});
  Status barrier(const CallOptions& call = {});
  Status alltoall(const void* send, void* recv, size_t count, DataType dt,
                  const CallOptions& call = {});
  Status alltoallv(const void* send, const size_t* send_counts, const size_t* send_displs,
                   void* recv, const size_t* recv_counts, const size_t* recv_displs, DataType dt,
                   const CallOptions& call = {});
  Status gather(const void* send, void* recv, size_t count, DataType dt, int root,
                const CallOptions& call = {});
  Status scatter(const void* send, void* recv, size_t count, DataType dt, int root,
                 const CallOptions& call = {});

  /// OK, or the first error that broke this communicator; its rank() names the culprit.
  Status status() const;

  /// Go on without the ranks that failed (NCCL's ncclCommShrink): every rank still alive calls
  /// it, typically after a call returned RemoteError or Timeout. The callers agree through the
  /// Group's store on who is gone -- the ranks this rank knows failed (status()'s culprit, its
  /// failed endpoints), those in `exclude` on any rank, and those that neither call shrink nor
  /// are known to have failed within ShrinkOptions::wait -- so every survivor keeps the same
  /// set (a rank excluded while alive gets Aborted, never a communicator of its own). Calls in
  /// flight end with Aborted; what they posted is cancelled (Transport::cancel_tags) and
  /// drained. The new communicator runs over the same connections (no rendezvous): its
  /// ranks are the survivors renumbered in order (group().parent_rank() maps them back), its
  /// options this one's. It owns its Group; this communicator stays, broken (Aborted) -- destroy
  /// it, then its Group, whenever convenient. A rank that is not broken yet when it calls
  /// shrink breaks first and tells every peer (Aborted naming it), so ranks inside a call
  /// learn to call shrink too. Same thread rules as wait(). Needs a store that outlives the
  /// failed ranks for set/check/add (gw-launch's and torchrun's do, unless rank 0 failed).
  /// @return the survivors' communicator; Aborted (this rank was excluded); Timeout (the
  ///         agreement did not finish within wait + 10 s); the store's errors.
  Result<std::unique_ptr<Communicator>> shrink(std::span<const int> exclude = {},
                                               const ShrinkOptions& opts = {});
  /// Grow (every rank calls it alike, with no call in flight): `added` new ranks join with
  /// Communicator::join(..., name, ...) and take ranks size()..size()+added-1 in the order
  /// they arrive. Only the new pairs connect; this communicator's endpoints carry on. Returns
  /// the grown communicator (this one's options; it owns its Group); this one stays, broken
  /// (Aborted): destroy it when convenient. `name` must be new to the store (one per grow).
  /// @return Timeout naming the ranks that did not come within `timeout`; InvalidArgument
  ///         (broken: shrink first; calls in flight); connect and store errors.
  Result<std::unique_ptr<Communicator>> grow(int added, const std::string& name, Nanos timeout);
  /// A new rank's side of grow(): join the group that grows under `name` through `store` (the
  /// job's), over `transport`. @return as grow(); InvalidArgument (more joined than added).
  static Result<std::unique_ptr<Communicator>> join(std::shared_ptr<Store> store,
                                                    std::unique_ptr<Transport> transport,
                                                    const std::string& name, Nanos timeout,
                                                    const CommOptions& opts = {});
  /// The group this communicator runs on (a shrunk one owns its own).
  Group& group();

  /// Abort: the one call that may come from any thread, also while another thread is inside a
  /// call on this communicator. The communicator breaks with Aborted (rank() = this rank):
  /// the thread driving it sees the request within 20 ms (wait() polls that often) and every
  /// call in flight returns Aborted; each peer gets a notice and its calls return Aborted
  /// naming this rank (Status::rank()) as soon as it drives progress — within 200 ms when it
  /// is blocked in wait(). With no thread inside a call, the next call (or the destructor)
  /// carries it out. NCCL's ncclCommAbort, except that destruction stays the owner's.
  /// @param reason put into every rank's error text.
  void abort(std::string_view reason = {});

  /// For an embedder that polls the Group's completion queue itself (the C API's
  /// point-to-point calls): hand over the completions that are not its own (may be none) and
  /// carry out a pending abort(). Same thread rules as wait().
  /// @return status(): whether a notice, a failure or an abort broke the communicator.
  Status handle(std::span<const Completion> completions);
  /// Write this rank's flight record (its last calls and what it knows of each peer) as JSON
  /// to <coll.flight_dir>/gw-flight-<rank>.json now; read them all with `gw-doctor DIR`.
  /// Same thread rules as wait(); from elsewhere send the process SIGUSR1.
  /// @return the file's path; NotSupported (coll.flight_records = 0); SystemError.
  Result<std::string> dump_flight_record();
  /// The calls the flight recorder holds, oldest first (empty when it is off).
  std::vector<FlightRecord> flight_records() const;
  /// The algorithm Algo::kAuto picks for an allreduce of `bytes`.
  Algo choose_algo(size_t bytes) const;

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  /// create(), succeeding `prev` (shrink, grow): its flight recorder and health thread are
  /// taken over, and its calls' generations are left behind.
  static Result<std::unique_ptr<Communicator>> create(Group& group, const CommOptions& opts,
                                                      Impl* prev);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw
