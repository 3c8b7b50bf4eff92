/// @file health_server.h
/// A communicator's health query (docs/failures.md): a thread that answers each connection to
/// an abstract unix socket with one JSON document (the flight record's format: the rank's
/// last calls, its peers as it sees them, the transport's counters) and closes it. A rank
/// that computes, or hangs inside a call, still answers; a stopped process does not, and
/// gw-doctor --live names it by that.
///
/// The socket's name: "@gw-health/<job>/<rank>/<pid>.<n>" (job: Group::job_id in hex; n: the
/// process's communicator count), so tools find every rank of this host in /proc/net/unix
/// and no file is left behind.
///
/// Thread-safety: start() and the destructor on the communicator's thread; `answer` runs on
/// the server's thread and must read only state safe to read from it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gw_status.h"

namespace gw::coll {

inline constexpr char kHealthPrefix[] = "gw-health/";

class HealthServer {
 public:
  using Answer = std::function<std::string()>;
  using Tick = std::function<void()>;
  /// Binds "@<name>" and starts the thread; `tick` (optional) runs on it every `tick_ms`
  /// (the metrics file). @return SystemError naming the socket.
  static Result<std::unique_ptr<HealthServer>> start(std::string name, Answer answer,
                                                     Tick tick = {}, int tick_ms = 0);
  /// Stops the thread (at once: it sleeps in poll() on a stop descriptor too).
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;
  const std::string& name() const { return name_; }

 private:
  HealthServer() = default;
  void run();
  void serve(int fd);
  std::string name_;
  Answer answer_;
  Tick tick_;
  int tick_ms_ = -1;
  int listen_fd_ = -1, stop_fd_ = -1;
  std::thread thread_;
};

}  // namespace gw::coll
