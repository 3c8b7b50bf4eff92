// Hierarchical allreduce for several ranks per host, as three rings of the ring engine:
//   phase 0: reduce-scatter inside the host (L local ranks): local rank l holds the host's sum
//            of part l (the L-way split of the vector);
//   phase 1: allreduce of part l across the H hosts, on the ring of local rank l of every host
//            (L rings side by side, so every host link carries L streams);
//   phase 2: allgather of the parts inside the host.
// Across hosts each rank sends 2(H-1)/H of its part, i.e. the host link carries 2(H-1)/H·S
// instead of the flat ring's 2(n-1)/n·S·L: the link is the scarce resource it saves.
// Phases run one after the other; units of phase p are p << 27 on the wire, so a message of a
// later phase is never taken for one of an earlier phase.
#include <algorithm>

#include "coll_impl.h"

namespace gw {
namespace {

using coll::Task;

constexpr int kDone = 3;

}  // namespace

void Communicator::Impl::hier_init() {
  const int hosts = group.num_hosts();
  if (hosts < 2 || hosts == n) return;  // one host, or one rank per host: the flat ring
  std::vector<std::vector<int>> by_host(static_cast<size_t>(hosts));
  for (int r = 0; r < n; ++r) by_host[static_cast<size_t>(group.host_of(r))].push_back(r);
  for (auto& h : by_host) {
    if (h.size() != by_host[0].size()) return;  // uneven hosts: the flat ring
  }
  const auto& mine = by_host[static_cast<size_t>(group.host_of(rank))];
  local_ranks = mine;
  local_pos = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  cross_ranks.clear();
  for (auto& h : by_host) cross_ranks.push_back(h[static_cast<size_t>(local_pos)]);
  cross_pos = group.host_of(rank);
  hier_ok = true;
}

Algo Communicator::Impl::auto_algo(size_t bytes) const {
  if (bytes <= rd_max_bytes) return Algo::kRecursiveDoubling;
  return hier_ok ? Algo::kHierarchical : Algo::kRing;
}

namespace {

// Geometry of op.phase on the ring engine's fields.
void phase_geometry(const Communicator::Impl& im, Task& op) {
  const auto L = static_cast<int>(im.local_ranks.size());
  const auto H = static_cast<int>(im.cross_ranks.size());
  op.unit_base = static_cast<uint32_t>(op.phase) << 27;
  op.avg_div = 0;
  if (op.phase == 1) {
    const size_t base = op.count / static_cast<size_t>(L), rem = op.count % static_cast<size_t>(L);
    const auto l = static_cast<size_t>(im.local_pos);
    op.ring_ranks = im.cross_ranks.data();
    op.ring_n = H;
    op.ring_pos = im.cross_pos;
    op.ring_off = l * base + std::min(l, rem);
    op.ring_count = base + (l < rem ? 1 : 0);
    op.ring_in = op.work;
    op.rs = op.ag = static_cast<uint32_t>(H - 1);
    op.avg_div = static_cast<uint32_t>(im.n);  // the whole world's sum is complete here
    return;
  }
  op.ring_ranks = im.local_ranks.data();
  op.ring_n = L;
  op.ring_pos = im.local_pos;
  op.ring_off = 0;
  op.ring_count = op.count;
  op.ring_in = op.phase == 0 ? op.in : op.work;
  op.rs = op.phase == 0 ? static_cast<uint32_t>(L - 1) : 0;
  op.ag = op.phase == 0 ? 0 : static_cast<uint32_t>(L - 1);
}

}  // namespace

Status coll::hier::setup(Communicator::Impl& im, Task& op) {
  if (!im.hier_ok) {
    return Status(Code::kInvalidArgument,
                  im.where(op) +
                      ": hierarchical allreduce needs ranks on 2 or more hosts with the "
                      "same number (2 or more) of ranks on each; this group has " +
                      std::to_string(im.group.num_hosts()) +
                      " host(s) (set GW_HOST per rank, or use algo ring)");
  }
  op.engine = coll::Engine::kHier;
  op.phase = 0;
  phase_geometry(im, op);
  return coll::ring::start(im, op);
}

Status coll::hier::advance(Communicator::Impl& im, Task& op) {
  while (op.phase < kDone) {
    GW_RETURN_IF_ERROR(coll::ring::advance(im, op));
    // A phase ends when all its messages are through: no completion of it can come later.
    const bool idle = op.next_send == op.units && op.next_recv == op.units &&
                      op.sends_done == op.sends_total && op.recvs_done == op.recvs_total &&
                      op.hdr_pending == 0 && op.nheld == 0;
    if (!idle) return Status();
    if (++op.phase == kDone) break;
    phase_geometry(im, op);
    GW_RETURN_IF_ERROR(coll::ring::start(im, op));
  }
  return Status();
}

}  // namespace gw
