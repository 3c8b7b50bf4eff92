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
/// Thread-safety: start(), rebind() and the destructor on the communicator's thread; `answer`
/// runs on the server's thread and must read only state safe to read from it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
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
  /// Serve another communicator from now on (a shrink's or grow's successor): binds "@<name>"
  /// first, then swaps the socket and the callbacks; the thread goes on (none started: a new
  /// thread and its first wake-up cost a shrink ~1 ms on 2 cores). The old name is released.
  /// `swap` runs under the server's lock, with the new callbacks in place: no query is being
  /// answered then (move what the old answer read). On an error nothing changed.
  Status rebind(std::string name, Answer answer, Tick tick, int tick_ms,
                const std::function<void()>& swap = {});
  const std::string& name() const { return name_; }

 private:
  HealthServer() = default;
  static Result<int> bind_socket(const std::string& name);
  void run();
  void serve(int fd);
  std::string name_;
  std::mutex mu_;  // the callbacks, tick_ms_ and listen_fd_ (swapped by rebind)
  Answer answer_;
  Tick tick_;
  int tick_ms_ = -1;
  int listen_fd_ = -1, stop_fd_ = -1;
  int old_fd_ = -1;        // the socket rebind replaced; the thread closes it (it may poll it)
  bool stopping_ = false;  // under mu_: the destructor's wake, not rebind's
  std::thread thread_;
};

}  // namespace gw::coll
