/// @file coll_post.h
/// Posting one collective's requests (coll_post.cc): tags and wr_ids, the registration of each
/// buffer, bursts of one step's requests to one peer in one post call, and the descriptor
/// headers held back to leave with the first data to their peer. Hot path: no allocation; a
/// refused post becomes an error through Faults::post_error.
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include <span>

#include "coll_task.h"

namespace gw::coll {

using Impl = Communicator::Impl;

struct Poster {
  static constexpr size_t kMaxUserMrs = 64;  ///< user buffers registered at a time (mr_for)
  explicit Poster(Impl& owner) : im(owner) {}
  Impl& im;

  /// Post one request. `unit` names it in its completion; the tag carries `tag_unit`
  /// (default: unit). @return whether the transport took it.
  Result<bool> send(Task& op, int peer, const void* buf, size_t len, uint32_t unit,
                    uint32_t tag_unit = ~0u);
  Result<bool> recv(Task& op, int peer, void* buf, size_t len, uint32_t unit,
                    uint32_t tag_unit = ~0u);
  // Bursts: one step's requests to one peer in one post call.
  SendRequest send_req(Task& op, const void* buf, size_t len, uint32_t unit,
                       uint32_t tag_unit = ~0u);
  RecvRequest recv_req(Task& op, void* buf, size_t len, uint32_t unit, uint32_t tag_unit = ~0u);
  /// @return how many of `reqs` (a prefix) the transport took.
  Result<size_t> sends(Task& op, int peer, std::span<const SendRequest> reqs);
  Result<size_t> recvs(Task& op, int peer, std::span<const RecvRequest> reqs);
  // Headers held by headers(hold): each leaves in the post call of the first data to its
  // peer. The engines' sends: send_with_held one at a time; a burst puts held_header() in
  // front and gives the count taken to took_held().
  Result<bool> send_with_held(Task& op, int peer, const void* buf, size_t len, uint32_t unit,
                              uint32_t tag_unit = ~0u);
  /// The held header for `peer` as a request (`*idx`: its place, -1 and false: none).
  bool held_header(Task& op, int peer, SendRequest* r, int* idx);
  /// A burst with held header `idx` in front took `took` requests: @return the data's share.
  size_t took_held(Task& op, int idx, size_t took);
  /// Held headers still waiting go alone. @return false: the transport did not take all.
  Result<bool> send_held(Task& op);
  /// InvalidArgument naming both calls when `d` (received from `peer`) differs from op's.
  Status check_desc(const Task& op, int peer, const Desc* d, size_t len) const;
  /// Descriptor headers to `to`, from `from`. `hold`: the sends wait in op.held for the engine
  /// to post them with its data.
  Status headers(Task& op, std::span<const int> to, std::span<const int> from, bool hold = false);
  /// Ring-neighbour descriptor headers, as the ring's: any mismatch is seen by two ranks.
  Status ring_headers(Task& op, bool hold = false);
  const MemoryRegion* mr_for(const Task& op, const void* p, size_t len);
  /// One point-to-point request of `op` (peer -1: receive from any rank).
  /// @return whether the transport took it.
  Result<bool> p2p(Task& op, int peer, bool is_send, void* buf, size_t len, uint32_t tag);
};

}  // namespace gw::coll
