/// @file gw_store.h
/// Store: the key-value rendezvous ranks use to exchange addresses (torch.distributed's
/// Store, Gloo's rendezvous). Implementations: TCP (server on rank 0 or standalone), file
/// (shared directory), in-process (threads). Every blocking call has a timeout.
/// Keys and values are arbitrary bytes, at most 64 MiB each; counters (add) are decimal text.
/// Errors name the store and, quoted (non-printable bytes as \xNN), the keys concerned.
/// Thread-safety: all Store implementations are safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gw_status.h"
#include "gw_time.h"

namespace gw {

class Store {
 public:
  virtual ~Store() = default;
  /// Set (or overwrite) a key. @return InvalidArgument (over 64 MiB), SystemError (file
  /// store), RemoteError (TCP server gone), Timeout (TCP server did not answer).
  virtual Status set(std::string_view key, std::string_view value) = 0;
  /// Wait until `key` exists and return its value. @return Timeout naming the key; RemoteError
  /// with Status::rank() set when a rank left the job while the key was missing (TCP store of a
  /// launched job: that rank's session closed without a goodbye); else as set.
  virtual Result<std::string> get(std::string_view key, Nanos timeout) = 0;
  /// Atomically add `delta` to an integer key (created as 0) and return the new value.
  /// @return InvalidArgument when the key holds no integer or the sum overflows; else as set.
  virtual Result<int64_t> add(std::string_view key, int64_t delta) = 0;
  /// Wait until all keys exist. @return Timeout naming the keys still missing; RemoteError naming
  /// a rank that left (as get); else as set.
  virtual Status wait(std::span<const std::string> keys, Nanos timeout) = 0;
  /// Whether all keys exist now (no waiting). @return as set.
  virtual Result<bool> check(std::span<const std::string> keys) = 0;
};

/// In-process store shared by threads (tests, single-process multi-rank runs).
std::shared_ptr<Store> make_in_process_store();

/// Store on files in `dir` (created if missing): one file per key, written by rename; add()
/// holds an flock. Works across processes on one host or on a shared file system with flock;
/// get/wait poll (1 ms doubling to 50 ms). @return SystemError if dir cannot be created,
/// InvalidArgument if it is not a directory.
Result<std::shared_ptr<Store>> make_file_store(const std::string& dir);

/// A TCP store server; serves until destroyed (its clients then get RemoteError). One thread
/// polls every client; get/wait park on the server until the keys exist or time out. A client
/// that sends a malformed or oversized request is disconnected with a warning.
/// Thread-safety: owns one serving thread; port() may be called from any thread.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  /// Listen on host:port (port 0 = any free port; host "" = every interface, IPv6 and IPv4).
  /// @return SystemError (bind failure, naming host:port), Unavailable (host not resolvable).
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string& host, uint16_t port);
  virtual uint16_t port() const = 0;
};

/// Who a TCP store client is within a launched job. The defaults: an anonymous client.
struct StoreIdentity {
  /// This client's rank, or -1. A ranked client keeps a session connection open to the server;
  /// if it closes without the goodbye the client's destructor (or exit()) sends, the process
  /// was killed or crashed, and every get/wait of the job still missing keys fails at once
  /// with RemoteError naming this rank (Status::rank()).
  int rank = -1;
  /// The rank whose process serves the store (0 in a launched job), or -1: a lost server is
  /// then reported as RemoteError with Status::rank() == server_rank.
  int server_rank = -1;
};

/// Client of a TCP store; retries connecting with back-off until `timeout` (the server may
/// start later). Requests wait for the reply at most their own timeout plus
/// store.io_timeout_ms; concurrent requests use separate connections.
/// @return Timeout naming host:port and the last connect error; InvalidArgument (no host/port
///         or a rank over 65535); RemoteError when the server refused the session.
Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 Nanos timeout, StoreIdentity who = {});

/// Waits until keys[r] exists for every rank r (one key per rank: an address, a barrier
/// arrival). @return OK; Timeout listing the ranks whose keys are missing ("ranks 1, 3 did not
/// <what> within N ms"), Status::rank() the lowest of them; the store's errors (a TCP store's
/// RemoteError names a rank that left).
Status wait_ranks(Store& store, std::span<const std::string> keys, Nanos timeout,
                  std::string_view what = "reach the store barrier");

/// Store barrier of ranks 0..size-1: sets "<prefix>/<rank>", then wait_ranks over every
/// rank's key. @return as wait_ranks, and set's errors.
Status store_barrier(Store& store, const std::string& prefix, int rank, int size, Nanos timeout);

/// Store that puts `prefix/` before every key (one namespace per group or job).
std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> inner, std::string prefix);

/// Rank and world size as the launcher gave them.
struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;  ///< where rank 0 serves the TCP store
  uint16_t master_port = 0;
  std::string source;  ///< "gradwire", "torchrun", "Open MPI" or "Slurm"
};

/// Read GW_RANK/GW_WORLD_SIZE/GW_MASTER_ADDR/GW_MASTER_PORT, else torchrun's RANK/WORLD_SIZE/
/// MASTER_ADDR/MASTER_PORT, else OMPI_COMM_WORLD_RANK/SIZE, else SLURM_PROCID/SLURM_NTASKS
/// (master address/port then from GW_MASTER_* or MASTER_*).
/// @return Unavailable when no launcher variables are set; InvalidArgument for bad values.
Result<LaunchInfo> discover_launch();

/// TCP store for a launched job: rank 0 starts the server (kept alive by the returned store),
/// every rank connects with StoreIdentity{info.rank, 0}. @return as TcpStoreServer::start and
/// connect_tcp_store.
Result<std::shared_ptr<Store>> store_for_launch(const LaunchInfo& info, Nanos timeout);

/// A port for a job's TCP store on this host (what a launcher puts in GW_MASTER_PORT): free
/// now on every interface, and below the kernel's ephemeral range (ip_local_port_range), so
/// that no connect() on the host takes it as its local port before rank 0 binds it (a port
/// from bind(0) can be: on a host churning connections, 6 of 81 local jobs failed so).
/// Falls back to an ephemeral port when none of 64 random tries below the range is free.
/// @return SystemError when no port can be bound at all.
Result<uint16_t> pick_store_port();

}  // namespace gw
