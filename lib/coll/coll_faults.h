/// @file coll_faults.h
/// Failures of a communicator (coll_notice.cc; the protocol: coll_notice.h): failing a call or
/// every call, the notices that tell the peers, a peer's failure and its settle time, the
/// deadlines and their timeout phase, and abort.
/// Thread-safety: as Communicator, except request_abort() (any thread).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "coll_task.h"

namespace gw::coll {

using Impl = Communicator::Impl;

struct Faults {
  explicit Faults(Impl& owner);  // both out of line (coll_notice.cc), where Notices is complete
  ~Faults();
  Impl& im;
  std::unique_ptr<Notices> notices;
  uint32_t notice_id = 0;  ///< this communicator's, in its notices' wr_ids

  /// Fail one call with `st` (communicator.cc).
  void fail(Task& op, Status st);
  /// Break the communicator with `st` (the first error stays) and fail every call in flight;
  /// `tell_peers`: send every peer a failure notice (not when `st` came from one).
  void fail_all(const Status& st, bool tell_peers = true);
  /// Send every peer a failure notice with `st` (once per communicator).
  void tell_failure(const Status& st);
  /// A refused post to `peer`: RemoteError naming it when its endpoint has failed (every
  /// driver alike: tcp says RemoteError, rdma Unavailable), else `st` in context.
  Status post_error(const Status& st, int peer, const std::string& what) const;
  /// A peer's request failed: fail with `st` after a short settle time, unless a notice
  /// naming the origin arrives first (a neighbour that quit on a notice closes its
  /// connections about when the origin's notice arrives here).
  void peer_failed(Status st);
  /// Deadlines: the timeout phase (coll_notice.h), then the Timeout naming the culprits;
  /// and the end of a peer failure's settle time.
  void check_deadlines();
  /// Enter the timeout phase: report whom this rank waits on to every peer (once).
  void start_suspect();
  /// Peers with requests of this rank pending (bit r: rank r; ranks below 64).
  uint64_t waiting_mask() const;
  void count_post(int peer, bool is_send);
  void send_notice(int slot, const Notice& m);
  /// Drive progress until this rank's notices are sent, at most 200 ms.
  void flush_notices();
  void request_abort(std::string_view reason);  ///< any thread
  bool abort_if_requested();  ///< the driving thread; true if it carried one out now
};

}  // namespace gw::coll
