/// @file coll_notice.h
/// Failure notices: how every rank of a communicator learns that it is broken, and who broke
/// it. A rank that fails on its own (a peer's endpoint failed, a mismatch, an abort, a stopped
/// peer found at a timeout) sends one small notice to every peer, over the transport, on a
/// tag of its own that no collective or point-to-point call uses; each rank keeps a few
/// any-source receives posted on that tag, so a notice completes in whatever wait the rank is
/// blocked in. A rank failing because of a notice keeps the notice's culprit (Status::rank())
/// and does not pass the notice on: the origin sent it to everyone.
///
/// Why the transport and not the store: every pair of ranks is already connected (Group),
/// a notice then costs one message and wakes the blocked rank's own wait at once; watching a
/// store key would need a poll of the store server from every wait loop, and the store
/// usually lives in rank 0, the one process whose death would take it along.
///
/// Timeouts (a stopped rank sends nothing, fails nothing): at its deadline a rank does not
/// fail at once; it sends a report (the peers it has requests pending with) and collects the
/// others' for a grace period. A report wakes every rank into the same phase. At the end, the
/// culprits are the ranks waited on that sent no report: the survivors all name the stopped
/// rank, not the neighbour that was stuck behind it.
/// Thread-safety: as Communicator, except request_abort() (any thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "coll_impl.h"

namespace gw::coll {

/// One notice on the wire (fixed size; little-endian hosts).
struct Notice {
  static constexpr uint32_t kMagic = 0x67776e31u;  // "gwn1"
  enum Kind : uint8_t { kFailed = 1, kReport = 2 };
  uint32_t magic = kMagic;
  uint8_t kind = 0;
  uint8_t code = 0;  ///< gw::Code of the failure
  uint16_t reserved = 0;
  int32_t culprit = -1;  ///< rank at fault, -1 unknown
  int32_t sender = -1;
  uint64_t waiting = 0;  ///< kReport: bit r set = the sender waits on rank r (r < 64)
  char text[488] = {};   ///< the sender's error, cut to fit, NUL-terminated
};
static_assert(sizeof(Notice) == 512);

struct Notices {
  static constexpr int kRecvs = 4;  ///< any-source receives kept posted
  RegBuf buf;                       ///< kRecvs receive slots, then 2 send slots
  int posted = 0;                   ///< receives posted, not completed
  uint32_t sends_pending = 0;       ///< notices sent, not completed
  bool sent_failure = false, sent_report = false;
  bool flushed = false;  ///< flush_notices() ran (once: a stopped peer never drains)
  // Per peer: requests posted and not completed (whom a rank waits on at a timeout).
  std::vector<uint32_t> pend_from, pend_to;
  // A peer's failure waiting for its settle time (Faults::peer_failed).
  Status settle;
  Clock::time_point settle_end{};
  // Timeout phase.
  bool suspect = false;
  Clock::time_point grace_end{};
  uint64_t reported = 0, waited = 0;
  // Abort: 0 none, 1 requested (reason set), 2 handled.
  std::atomic<int> abort_state{0};
  std::mutex abort_mu;  // guards abort_reason
  std::string abort_reason;

  Notice* slot(int i) { return reinterpret_cast<Notice*>(buf.data()) + i; }
};

/// Receives posted: any-source, so the endpoints stay free of pending work (a peer closing in
/// order is still quiet). @return the setup error (registration).
Status notices_init(Communicator::Impl& im);
/// Handles a completion of the notice protocol and counts every other one per peer.
/// @return true when `c` was a notice's (nothing else to do with it).
bool notices_on_completion(Communicator::Impl& im, const Completion& c);

}  // namespace gw::coll
