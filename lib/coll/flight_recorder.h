/// @file flight_recorder.h
/// Flight recorder: a rank's last N calls (collectives and point-to-point) in a fixed ring,
/// allocated once, written as JSON for gw-doctor when something goes wrong (docs/failures.md).
///
/// Thread-safety: one writer, the thread driving the communicator (begin/end, no allocation,
/// no lock, no system call). Readers (snapshot, write_json) may run on any thread at any time:
/// each slot carries a sequence stamp, odd while it is written, and its words are relaxed
/// atomics, so a reader copies a record whole or retries, and never sees a torn one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gw_status.h"

namespace gw::coll {

/// kRefused: called on a broken communicator (root unknown: -1); recorded so the call's
/// sequence number still lines up with the other ranks'.
enum class FlightState : uint8_t { kRunning, kOk, kFailed, kTimedOut, kAborted, kRefused };
const char* flight_state_name(FlightState s);

/// One call as recorded (plain data, copied in and out of the ring).
struct FlightEntry {
  uint64_t id = 0;   ///< 1, 2, ... in call order on this rank; 0: empty slot
  uint32_t seq = 0;  ///< the collective's sequence number (0: point-to-point)
  uint8_t kind = 0;  ///< coll::Kind
  uint8_t dtype = 0, rop = 0, algo = 0;
  uint8_t state = 0;  ///< FlightState
  uint8_t code = 0;   ///< gw::Code of the end
  uint8_t device = 0, reserved = 0;
  int32_t root = 0;    ///< root, or the peer of a point-to-point call (-1: any)
  uint32_t ranks = 0;  ///< communicator size
  uint64_t count = 0;  ///< elements as the caller passed them
  uint64_t bytes = 0;
  uint64_t waiting = 0;  ///< at the end of a failed call: bit r = requests still pending with r
  /// Steady clock (gw::now_ns); the end at the clock tick's resolution (1-4 ms), 0 while running.
  int64_t start_ns = 0, end_ns = 0;
};

/// What this rank knows of one peer when it dumps.
struct FlightPeer {
  int rank = 0;
  bool endpoint_ok = true;
  std::string error;          ///< the endpoint's sticky error when not ok
  int64_t last_heard_ns = 0;  ///< last completion from the peer (steady clock), 0: none yet
  uint32_t pending_recvs = 0, pending_sends = 0;  ///< requests waiting on it now
};

/// The rest of a dump: who, why, and the communicator's state.
struct FlightContext {
  int rank = 0, size = 1;
  std::string trigger;  ///< "failure", "timeout", "abort", "signal", "request"
  std::string transport;
  Status broken;  ///< the communicator's first error (OK: not broken)
  std::vector<FlightPeer> peers;
  std::string job;  ///< health answers: the job's id (Group::job_id)
  /// waiting_on: `waiting` when known, else the peers with pending requests.
  bool waiting_known = false;
  uint64_t waiting = 0;
  /// The transport's counters and their age (health answers; < 0: none written).
  std::vector<std::pair<std::string, uint64_t>> counters;
  int64_t counters_age_ns = -1;
};

class FlightRecorder {
 public:
  /// Allocates `capacity` (> 0) slots once.
  explicit FlightRecorder(size_t capacity);
  size_t capacity() const { return cap_; }
  /// Records the start of a call (e.id and e.state are set here). @return its id.
  uint64_t begin(FlightEntry e);
  /// Records the end of call `id`; nothing when it has been overwritten or has ended.
  void end(uint64_t id, FlightState s, uint8_t code, uint64_t waiting, int64_t end_ns);
  /// A new communicator takes this recorder over (shrink, grow): earlier calls leave the
  /// snapshots (their communicator's failure dump has them), ids go on.
  void restart() { first_.store(next_.load(std::memory_order_relaxed), std::memory_order_release); }
  /// Calls recorded so far since the last restart (also those overwritten).
  uint64_t recorded() const {
    return next_.load(std::memory_order_acquire) - first_.load(std::memory_order_acquire);
  }
  /// Consistent copies of the last `last` records held, oldest first. Any thread.
  std::vector<FlightEntry> snapshot(size_t last = SIZE_MAX) const;
  /// The dump: `ctx` and the last `last` records as JSON (format gradwire-flight-1). Any thread.
  std::string json(const FlightContext& ctx, size_t last) const;
  /// Writes the records and `ctx` as JSON to `path` (through a temporary file and rename, so
  /// a reader never sees half a dump). @return SystemError naming the path.
  Status write_json(const std::string& path, const FlightContext& ctx) const;

 private:
  static constexpr size_t kWords = sizeof(FlightEntry) / 8;
  static_assert(sizeof(FlightEntry) % 8 == 0);
  struct Slot {
    std::atomic<uint64_t> stamp{0};  ///< odd: being written
    std::atomic<uint64_t> w[kWords];
  };
  void store(Slot& s, const FlightEntry& e);
  bool load(const Slot& s, FlightEntry* e) const;
  size_t cap_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_{1};
  std::atomic<uint64_t> first_{1};  ///< the oldest id a snapshot shows (restart)
};

/// `dir`/gw-flight-`rank`.json; `dir` empty: $TMPDIR, else /tmp.
std::string flight_path(const std::string& dir, int rank);

/// SIGUSR1: installs the handler once per process (only when no other handler is set).
/// @return whether gradwire's handler is in place.
bool flight_install_signal();
/// Times SIGUSR1 arrived so far (a recorder dumps when this moves past what it has seen).
uint32_t flight_signals();

}  // namespace gw::coll
