/// @file fuzz_group.h
/// A fresh two-rank group over tcp on loopback, for the targets whose parser sits behind a
/// Group (collectives, parameter server): rank 0 runs the code under test, rank 1 is the
/// harness playing an untrusted peer.
#pragma once

#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>

#include "gw_group.h"
#include "gw_store.h"

namespace gw::fuzz {

inline std::unique_ptr<Group> join_group(std::shared_ptr<Store> store, int rank) {
  auto t = Transport::open("tcp:iface=lo,family=inet,cq_depth=256,max_outstanding=64");
  if (!t.ok()) std::abort();
  auto g = Group::create(std::move(store), std::move(*t), rank, 2, Millis(5000));
  if (!g.ok()) std::abort();
  return std::move(*g);
}

/// Ranks 0 and 1 (created concurrently: Group::create waits for every rank).
inline std::pair<std::unique_ptr<Group>, std::unique_ptr<Group>> two_groups() {
  auto store = make_in_process_store();
  std::unique_ptr<Group> g1;
  std::thread t1([&] { g1 = join_group(store, 1); });
  auto g0 = join_group(store, 0);
  t1.join();
  return {std::move(g0), std::move(g1)};
}

}  // namespace gw::fuzz
