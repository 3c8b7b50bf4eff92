/// @file coll_health.h
/// A communicator's health query (coll_health.cc; the socket: health_server.h): the answer to
/// gw-doctor --live, the copies of state it reads, and the metrics file.
/// Thread-safety: answer(), refresh() and write_metrics() run on the health thread; they read
/// atomics, the recorder, the copies under `mu`, and the transport only while no call holds it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "coll_task.h"
#include "health_server.h"

namespace gw::coll {

using Impl = Communicator::Impl;

struct Health {
  explicit Health(Impl& owner) : im(owner) {}
  Impl& im;
  std::unique_ptr<HealthServer> server;  ///< null when coll.health is off or the recorder is
  std::string transport_name, job_name;
  std::atomic<uint64_t> waiting{0};  ///< Faults::waiting_mask(), published now and then
  uint32_t polls = 0;
  std::mutex mu;  ///< guards the four below (written rarely, read by queries)
  Status broken;  ///< Impl::broken, for the health thread
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<std::string> peer_err;  ///< per peer: its endpoint's error, "" when ok
  int64_t counters_ns = 0;            ///< when they were read (0: never)
  std::string metrics_path;
  bool metrics_warned = false;

  /// `prev`: its health thread is taken over (rebound to this communicator's name).
  Status init(Impl* prev = nullptr);
  /// The answer to one query.
  std::string answer();
  /// Reads the transport's counters and endpoint errors when nobody drives it.
  void refresh();
  /// coll.metrics_file: this rank's counters as Prometheus text (every tick).
  void write_metrics();
  /// The poll loop's share: the waiting set, at each idle poll (a blocked wait: every
  /// 20 ms) and every 16th busy one (coll_impl.h: it reads Faults).
  inline void poll(bool idle);
  void set_broken(const Status& st);
};

}  // namespace gw::coll
