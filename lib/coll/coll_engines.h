/// @file coll_engines.h
/// The algorithm engines: free functions over a communicator (its Poster for the wire) and one
/// call (Task); Impl::advance and dispatch pick one with a switch on Task::engine, so the
/// per-message path has no virtual call. Each setup fills the Task and posts the first
/// requests; advance posts what the window allows; on_recv/on_send handle one completion.
/// Thread-safety: as Communicator (one thread at a time).
#pragma once

#include "coll_task.h"

namespace gw::coll {

using Impl = Communicator::Impl;

// Ring (coll_ring.cc): reduce-scatter then allgather, chunked and pipelined; broadcast.
namespace ring {
Status setup(Impl& im, Task& op);
Status advance(Impl& im, Task& op);
Status on_recv(Impl& im, Task& op, uint32_t unit, size_t len);
/// Start a ring of op.rs reduce-scatter and op.ag allgather steps on op's ring geometry.
Status start(Impl& im, Task& op);
}  // namespace ring

// Hierarchical allreduce (coll_hier.cc): rings within hosts, then across them.
namespace hier {
Status setup(Impl& im, Task& op);
Status advance(Impl& im, Task& op);
}  // namespace hier

// Recursive doubling (coll_rd.cc): the latency-optimal allreduce of small vectors.
namespace rd {
Status setup(Impl& im, Task& op);
Status advance(Impl& im, Task& op);
Status on_recv(Impl& im, Task& op, uint32_t unit, size_t len, int peer);
Status on_send(Impl& im, Task& op, uint32_t unit);
/// Pass a call mismatch found at `peer`'s message `d` on to the rest of op's partners.
void relay(Impl& im, Task& op, const Desc* d, size_t len, int peer);
}  // namespace rd

// All-to-all, gather, scatter (coll_xchg.cc): op.xparts filled by the caller.
namespace xchg {
Status setup(Impl& im, Task& op);
Status advance(Impl& im, Task& op);
Status on_recv(Impl& im, Task& op, uint32_t unit, size_t len, int peer);
}  // namespace xchg

// Binomial tree (coll_tree.cc).
namespace tree {
/// Gather/scatter of small host blocks: fills op.xparts, op.xrelay and op.xfinal for the
/// exchange engine. @return false: not small (the caller goes direct).
Result<bool> parts(Impl& im, Task& op, bool gather, size_t block);
}  // namespace tree

// Bruck's log-step all-to-all of small host blocks (coll_bruck.cc).
namespace bruck {
Status setup(Impl& im, Task& op);
Status advance(Impl& im, Task& op);
Status steps(Impl& im, Task& op);
Status on_recv(Impl& im, Task& op, uint32_t unit, size_t len, int peer);
}  // namespace bruck

}  // namespace gw::coll
