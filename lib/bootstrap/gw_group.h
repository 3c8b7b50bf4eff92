/// @file gw_group.h
/// Group: this rank, the world size and one connected Endpoint per peer, over one Transport.
/// Thread-safety: as Transport (one thread at a time).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gw_store.h"
#include "gw_transport.h"

namespace gw {

class Group {
 public:
  /// Publish this rank's address under "<prefix>/addr/<rank>", wait for every rank's, and
  /// connect all pairs before `timeout`: the lower rank dials, each rank dials all its higher
  /// peers before accepting its lower ones. The pair's ConnectParams::key is unique within the
  /// group and differs between prefixes. Size 1 makes no endpoints.
  /// Every rank also publishes its host under "<prefix>/host/<rank>": `host`, else GW_HOST,
  /// else the hostname and network namespace (ranks of one namespace share their host, so
  /// each namespace of a test bed is a host of its own). Collectives use it (hierarchical).
  /// A rank whose connect fails publishes "<prefix>/failed" (culprit rank and error); a rank
  /// waiting for a peer to dial it checks that key every 50 ms (Store::check only), so a rank
  /// killed or failed during set-up stops the others promptly; a rank killed while it is
  /// awaited in a store wait is reported by the TCP store's notice (gw_store.h). Every error
  /// names the rank at fault in Status::rank() where one is known.
  /// @return Timeout naming the ranks that never showed up (rank(): the lowest);
  ///         InvalidArgument for a bad rank/size or a peer on another driver; the connect error
  ///         with "group rank R: connect to rank P" (rank(): P unless the driver named
  ///         another); RemoteError for another rank's failure notice or a rank that left;
  ///         the store's errors.
  static Result<std::unique_ptr<Group>> create(std::shared_ptr<Store> store,
                                               std::unique_ptr<Transport> transport, int rank,
                                               int size, Nanos timeout,
                                               const std::string& prefix = "gw",
                                               const std::string& host = "");

  /// The survivors' group: the ranks of `keep` (sorted ranks of this group, this rank among
  /// them) renumbered 0..keep.size()-1 in order, over this group's transport and the
  /// endpoints to them -- no rendezvous, no connection. Endpoints and transport are shared:
  /// both groups stay valid, in either order of destruction. The new group's epoch() is this
  /// one's + 1 and its prefix "<prefix>.s<epoch>" (a ".s<n>" the prefix already ends in is
  /// replaced, not nested). Communicator::shrink decides `keep` with
  /// the other ranks; call this directly only with a set every survivor agrees on.
  /// @return InvalidArgument (unsorted, out of range, without this rank).
  Result<std::unique_ptr<Group>> shrink(std::span<const int> keep);

  /// Grow (every rank of this group calls it alike): `added` new ranks join through join()
  /// with the same `name` and take ranks size()..size()+added-1 in the order they arrive.
  /// Only the pairs with a new rank connect (a member dials, the lower new rank dials the
  /// higher); the members' endpoints are shared with this group, as with shrink(). The new
  /// group's epoch is this one's + 1 (on the new ranks too), its prefix `name`. The store is
  /// only set, checked, added to and read where present (polled), so a job whose TCP store
  /// saw a rank killed can still grow. @return Timeout naming the ranks that did not come;
  /// connect errors as create().
  Result<std::unique_ptr<Group>> grow(int added, const std::string& name, Nanos timeout);
  /// A new rank's side of grow(): waits for the members' call under `name`, takes the next
  /// rank, connects. @return as grow(); InvalidArgument when more ranks join than were added.
  static Result<std::unique_ptr<Group>> join(std::shared_ptr<Store> store,
                                             std::unique_ptr<Transport> transport,
                                             const std::string& name, Nanos timeout,
                                             const std::string& host = "");

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Endpoint to `peer` (peer != rank()).
  Endpoint& endpoint(int peer) { return *eps_[peer]; }
  /// Host of rank `r`: 0..num_hosts()-1, numbered in the order of each host's lowest rank.
  int host_of(int r) const { return hosts_[static_cast<size_t>(r)]; }
  int num_hosts() const { return num_hosts_; }
  /// The same on every rank of the group, different for groups alive at once (a hash of rank
  /// 0's address): names the job to tools (gw-doctor --live).
  uint64_t job_id() const { return job_id_; }
  /// How many shrinks made this group (0: Group::create); communicators put it in their tags.
  uint32_t epoch() const { return epoch_; }
  /// Numbers the communicators made on this group (the same on every rank when every rank
  /// makes them in the same order).
  uint32_t next_comm() { return comms_++; }
  /// This group's store prefix ("gw" by default).
  const std::string& prefix() const { return prefix_; }
  /// Rank `r`'s rank in the group this one was shrunk or grown from (r itself for a created
  /// group; -1 for a rank that joined).
  int parent_rank(int r) const { return parents_.empty() ? r : parents_[static_cast<size_t>(r)]; }
  Transport& transport() { return *transport_; }
  Store& store() { return *store_; }
  const std::shared_ptr<Store>& store_ptr() const { return store_; }

 private:
  Group() = default;
  /// grow()/join(): publish this rank's address and host under prefix_, read every rank's
  /// (polling), and connect every pair whose endpoint is missing; job_id_ and epoch_ set.
  Status link(Deadline deadline);
  /// Connects to every peer without an endpoint: dials the higher ranks, then accepts the
  /// lower ones; watches "<prefix>/failed" meanwhile and sets it on a failure.
  Status connect_missing(const std::vector<Address>& addrs, Deadline deadline,
                         const std::string& where);
  int rank_ = 0;
  int size_ = 0;
  int num_hosts_ = 1;
  uint64_t job_id_ = 0;
  uint32_t epoch_ = 0, comms_ = 0;
  std::string prefix_, label_;
  std::vector<int> hosts_, parents_;
  std::shared_ptr<Store> store_;
  // Shared with the groups shrunk from this one. Declared before eps_: endpoints die first.
  std::shared_ptr<Transport> transport_;
  std::vector<std::shared_ptr<Endpoint>> eps_;
};

}  // namespace gw
