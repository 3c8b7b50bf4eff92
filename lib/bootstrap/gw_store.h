/// @file gw_store.h
/// Store: the key-value rendezvous ranks use to exchange addresses (torch.distributed's
/// Store, Gloo's rendezvous). Implementations: TCP (server on rank 0 or standalone), file
/// (shared directory), in-process (threads). Every blocking call has a timeout.
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
  /// Set (or overwrite) a key. @return SystemError/RemoteError if the store is unreachable.
  virtual Status set(std::string_view key, std::string_view value) = 0;
  /// Wait until `key` exists and return its value. @return Timeout naming the key.
  virtual Result<std::string> get(std::string_view key, Nanos timeout) = 0;
  /// Atomically add `delta` to an integer key (created as 0) and return the new value.
  virtual Result<int64_t> add(std::string_view key, int64_t delta) = 0;
  /// Wait until all keys exist. @return Timeout naming the keys still missing.
  virtual Status wait(std::span<const std::string> keys, Nanos timeout) = 0;
  /// Whether all keys exist now (no waiting).
  virtual Result<bool> check(std::span<const std::string> keys) = 0;
};

/// In-process store shared by threads (tests, single-process multi-rank runs).
std::shared_ptr<Store> make_in_process_store();

/// Store on files in `dir` (created if missing); works across processes on one host or on a
/// shared file system. @return SystemError if dir cannot be created.
Result<std::shared_ptr<Store>> make_file_store(const std::string& dir);

/// A TCP store server; serves until destroyed. Thread-safety: owns one serving thread.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  /// Listen on host:port (port 0 = any free port). @return SystemError (bind failure).
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string& host, uint16_t port);
  virtual uint16_t port() const = 0;
};

/// Client of a TCP store; retries connecting until `timeout` (the server may start later).
/// @return Timeout naming host:port and the last connect error.
Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 Nanos timeout);

/// Store that puts `prefix/` before every key (one namespace per group or job).
std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> inner, std::string prefix);

/// Rank and world size as the launcher gave them.
struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;  ///< where rank 0 serves the TCP store
  uint16_t master_port = 0;
  std::string source;       ///< "gradwire", "torchrun", "Open MPI" or "Slurm"
};

/// Read GW_RANK/GW_WORLD_SIZE/GW_MASTER_ADDR/GW_MASTER_PORT, else torchrun's RANK/WORLD_SIZE/
/// MASTER_ADDR/MASTER_PORT, else OMPI_COMM_WORLD_RANK/SIZE, else SLURM_PROCID/SLURM_NTASKS
/// (master address/port then from GW_MASTER_* or MASTER_*).
/// @return Unavailable when no launcher variables are set; InvalidArgument for bad values.
Result<LaunchInfo> discover_launch();

/// TCP store for a launched job: rank 0 starts the server (kept alive by the returned store),
/// every rank connects. @return as TcpStoreServer::start and connect_tcp_store.
Result<std::shared_ptr<Store>> store_for_launch(const LaunchInfo& info, Nanos timeout);

}  // namespace gw
