/// @file coll_flight.h
/// A communicator's flight recorder (coll_flight.cc; the ring: flight_recorder.h): a record
/// per call and its end, the peers last heard from, and the dumps.
/// Thread-safety: as Communicator; heard_ns and the recorder are read by the health thread.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "coll_task.h"
#include "flight_recorder.h"

namespace gw::coll {

using Impl = Communicator::Impl;

struct Flight {
  explicit Flight(Impl& owner) : im(owner) {}
  Impl& im;
  std::unique_ptr<FlightRecorder> recorder;  ///< null when coll.flight_records is 0
  std::string dump_dir;
  uint32_t sigs = 0;  ///< SIGUSR1s seen (flight_signals())
  /// Per peer: its last completion here (steady ns); read by the health thread too.
  std::unique_ptr<std::atomic<int64_t>[]> heard_ns;
  Impl* from = nullptr;  ///< the communicator whose recorder is still to take over (Health)

  /// `prev`: the communicator this one succeeds (shrink, grow); its recorder is taken over
  /// when it has the same capacity (no new ring: page faults cost a shrink ~0.5 ms).
  Status init(int64_t records, std::string dir, Impl* prev = nullptr);
  /// Take over `from`'s recorder.
  void adopt();
  void start(Task& op);
  /// Records op's end with `st` (once; later calls do nothing).
  void end(Task& op, const Status& st);
  /// A call refused by a broken communicator (begin()'s arguments).
  void refused(Kind kind, DataType dt, ReduceOp rop, size_t count);
  /// The peers of `cs` were heard from now (one clock read per batch).
  void heard(std::span<const Completion> cs);
  /// Writes this rank's dump (`trigger` says why). @return its path.
  Result<std::string> dump(const char* trigger);
  /// A SIGUSR1 came since the last look: dump. Cheap when none did (one relaxed load).
  void poll() {
    if (recorder && flight_signals() != sigs) on_signal();
  }
  void on_signal();
};

}  // namespace gw::coll
