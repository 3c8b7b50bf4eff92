/// @file gw_ps.h
/// Parameter server over one Group: ranks 0..servers-1 are servers, the others workers.
/// Parameters are float32 keyed tensors sharded over the servers (gw_ps_layout.h). Workers
/// push gradients and pull parameters asynchronously (handles + wait with a timeout); the data
/// moves between the caller's registered buffers and the servers' registered shards with no
/// staging copy; servers receive with any-source receives. A worker's buffers may be CUDA
/// device memory: the transport moves it (GPUDirect) or stages it through pinned host memory
/// (tcp, dpdk), as for the collectives; the servers' shards stay in host memory.
///
/// Consistency, per part of a key; a worker's clock on a key is the number of pushes it has
/// made of that key:
///  - BSP: the server applies the sum of the W pushes of round t once all W arrived; a pull at
///    clock c is served once round c-1 is applied.
///  - ASP: each push is applied on arrival; pulls are served at once.
///  - SSP(s): pushes applied on arrival; a pull at clock c is served once the slowest worker's
///    clock is >= c - s.
/// Servers record the staleness they served (c minus the slowest worker's applied clock).
///
/// A Group carries one PsServer or PsWorker for its whole life: the receives they post cannot
/// be withdrawn from the transport, so a new job (another mode, other keys) takes a new Group.
///
/// Failure (PsOptions::on_loss, ps.on_loss): with "fail", a peer rank that goes away without
/// finishing (its endpoint fails: tcp closes, dpdk times out its heartbeats) is a RemoteError
/// on every other rank at its next wait/serve. With "continue" (the default):
///  - A lost worker is dropped by the servers (a warning names it and its push count;
///    PsServer::live_workers()). Rule for the rounds it leaves: every push a server received
///    whole before it saw the loss counts, in its round; BSP rounds from then on complete with
///    the workers left (the round in progress includes the lost worker's push iff it arrived).
///    SSP/ASP clocks and BSP rounds ignore it; pulls waiting on it are served. Other workers
///    go on.
///  - A lost server: every push/pull that touches its parts fails with RemoteError
///    (Status::rank() = the server) naming the server and the keys of its lost shard; keys
///    held by the other servers go on. Other servers go on.
/// Bad input from a worker (unknown part, wrong size, different key table) is answered by the
/// server with an error naming key and sizes. After a failed pull, keep its `out` buffer until
/// the Group is destroyed: its receive may stay posted in the transport (as for collectives,
/// gw_coll.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gw_group.h"
#include "gw_ps_layout.h"
#include "gw_status.h"
#include "gw_time.h"

namespace gw {

enum class Consistency : uint8_t { kBsp = 0, kAsp, kSsp };
/// What a rank does when a peer is lost (see the failure paragraph); kConfig: ps.on_loss.
enum class PsOnLoss : uint8_t { kConfig = 0, kContinue, kFail };
/// "bsp", "asp", "ssp".
const char* consistency_name(Consistency c);
std::optional<Consistency> parse_consistency(std::string_view name);

/// Settings shared by servers and workers; all ranks must agree (checked at setup). A zero or
/// negative value takes the [ps] configuration key.
struct PsOptions {
  int servers = 1;  ///< ranks 0..servers-1 serve
  Consistency mode = Consistency::kBsp;
  int staleness = 0;                     ///< SSP bound s (>= 0)
  int64_t min_part_bytes = -1;           ///< ps.min_part_bytes: smallest piece a key is cut into
  Nanos timeout{0};                      ///< ps.timeout_ms: setup, and finish()
  PsOnLoss on_loss = PsOnLoss::kConfig;  ///< ps.on_loss: "continue" or "fail"
};

/// How a server turns pushed gradients into parameters. Called on the server's thread.
class Updater {
 public:
  virtual ~Updater() = default;
  /// Floats of optimizer state per parameter element (momentum: 1).
  virtual size_t state_size() const { return 0; }
  /// Apply `grad` (the sum of `pushes` pushes) to one part of a key. `round`: a BSP round of
  /// `workers` pushes (all workers, fewer after a loss: then pushes == workers too);
  /// otherwise one asynchronous push.
  virtual void apply(std::span<float> params, std::span<float> state, std::span<const float> grad,
                     int pushes, int workers, bool round) = 0;
  virtual std::string name() const = 0;
};
/// Pure aggregation: a BSP round sets the parameters to the sum of the round's pushes (so the
/// PS stands in for an allreduce); an asynchronous push is added to them.
std::unique_ptr<Updater> make_sum_updater();
/// SGD on the workers' mean gradient: v = momentum·v + grad/workers; params -= lr·v. An
/// asynchronous push counts as one worker's share of a step.
std::unique_ptr<Updater> make_sgd_updater(float lr, float momentum);

/// Initial value of one part of a key (default: zeros).
using PsInit = std::function<void(uint64_t key, uint64_t offset, std::span<float> out)>;

/// A started push or pull; pass it to wait() (or test() until true) exactly once.
struct PsHandle {
  uint32_t slot = ~0u;
  uint32_t gen = 0;
};

/// Thread-safety: one thread at a time (like its Group's Transport). Must be destroyed before
/// the Group. Call finish() before destruction: an unfinished worker looks failed to its peers.
class PsWorker {
 public:
  /// Check the key table and options against every server. @return InvalidArgument (bad
  /// options, or a server's table differs: the message names the key and both sizes), Timeout,
  /// RemoteError, ResourceExhausted.
  static Result<std::unique_ptr<PsWorker>> create(Group& group, std::span<const KeySpec> keys,
                                                  const PsOptions& opts);
  ~PsWorker();
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;

  /// Register a buffer for push/pull (needed where the transport requires registration), of
  /// the kind it is (host, pinned or device memory).
  Result<MemoryRegion> register_memory(std::span<float> buf);

  /// Send `grad` (the key's size) to the servers; the buffer must stay untouched until wait().
  /// Advances this worker's clock on the key. @return InvalidArgument (unknown key, size
  /// mismatch, buffer outside mr), ResourceExhausted (too many requests in flight), the
  /// worker's sticky error.
  Result<PsHandle> push(uint64_t key, std::span<const float> grad,
                        const MemoryRegion* mr = nullptr);
  /// Fetch the key's parameters into `out` as the consistency mode allows. Errors as push().
  Result<PsHandle> pull(uint64_t key, std::span<float> out, const MemoryRegion* mr = nullptr);
  /// Drive progress until `h` finishes or the timeout. @return the request's status
  /// (RemoteError with the server's message for a rejected request), Timeout (the request
  /// stays in flight: wait again), InvalidArgument for an unknown handle.
  Status wait(PsHandle h, Nanos timeout);
  /// Progress without blocking. @return whether `h` is finished.
  Result<bool> test(PsHandle h);
  /// Drive the transport once without waiting. A polling transport (dpdk) acknowledges and
  /// answers its peers only while polled, so a worker busy elsewhere for longer than the
  /// transport's dead-peer timeout (dpdk.peer_timeout_ms) calls this now and then, or its
  /// peers take it for dead. @return the worker's sticky error.
  Status progress();
  /// Wait for everything in flight, tell every rank this worker is done, and wait until every
  /// other rank is done too (a closing barrier: afterwards nothing is in flight to this rank,
  /// so it may stop polling and be destroyed at once). After finish() only destruction is
  /// allowed; do not poll the Group's transport once the PsWorker is destroyed (its posted
  /// receives stay with the transport). @return the first error (a peer that failed during
  /// the barrier: RemoteError), Timeout (naming the ranks not finished).
  Status finish(Nanos timeout);

  /// This worker's clock on `key` (pushes made); -1 for an unknown key.
  int64_t clock(uint64_t key) const;
  int worker_index() const;  ///< 0..workers-1
  int workers() const;
  const PsLayout& layout() const;
  /// OK, or the sticky error (a failed peer, a server's complaint).
  Status status() const;

  struct Impl;

 private:
  explicit PsWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// What a server did; staleness is what it served (pull clock minus slowest applied clock).
struct PsServerStats {
  static constexpr size_t kStaleBuckets = 17;  ///< last bucket: staleness >= 16
  uint64_t pushes = 0, pulls = 0, rounds = 0, bad_requests = 0, deferred_pulls = 0;
  uint64_t lost_workers = 0, lost_servers = 0;  ///< peers lost and gone on without
  uint64_t bytes_in = 0, bytes_out = 0;
  int64_t max_staleness = 0;
  std::array<uint64_t, kStaleBuckets> staleness{};
};

/// Thread-safety: one thread at a time. Must be destroyed before the Group.
class PsServer {
 public:
  /// Allocate and register this server's shards, then check every worker's key table.
  /// @return InvalidArgument (bad options, this rank is not a server, a worker's table
  ///         differs), Timeout, RemoteError, ResourceExhausted.
  static Result<std::unique_ptr<PsServer>> create(Group& group, std::span<const KeySpec> keys,
                                                  const PsOptions& opts,
                                                  std::unique_ptr<Updater> updater,
                                                  PsInit init = {});
  ~PsServer();
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  /// Serve until every worker has finished or was lost and every other server is done or
  /// lost (OK; the same closing barrier as PsWorker::finish), a peer fails with on_loss fail
  /// (RemoteError naming it), or `timeout` passes (Timeout naming the workers still running).
  Status serve(Nanos timeout);

  const PsServerStats& stats() const;
  /// Workers not lost (ps.on_loss = "continue"); finished ones count as alive.
  int live_workers() const;
  const PsLayout& layout() const;
  /// Current values of part `part` (an index into layout().parts() held by this server).
  /// @return InvalidArgument if this server does not hold it.
  Result<std::span<const float>> part_values(uint32_t part) const;

  struct Impl;

 private:
  explicit PsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gw
