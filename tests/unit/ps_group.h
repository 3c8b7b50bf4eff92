// Two-rank groups over tcp on loopback, and a key table, for the PS tests that play a worker by
// hand against a real server (test_ps_table.cc, test_ps_msgs.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "gw_group.h"
#include "gw_store.h"
#include "ps_impl.h"

namespace gw {

inline std::unique_ptr<Group> join(std::shared_ptr<Store> store, int rank) {
  auto t = Transport::open("tcp:iface=lo");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return nullptr;
  auto g = Group::create(std::move(store), std::move(*t), rank, 2, Millis(10000));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(*g) : nullptr;
}

/// A worker's key table for one server with ps.min_part_bytes' default: the options of `o`,
/// `keys`, announced as `nkeys` keys.
inline std::vector<uint8_t> key_table(const PsOptions& o, std::span<const KeySpec> keys,
                                      uint64_t nkeys) {
  ps::TableHeader h;
  h.mode = static_cast<uint8_t>(o.mode);
  h.servers = 1;
  h.staleness = o.staleness;
  h.min_part = 65536 / sizeof(float);  // in elements
  h.nkeys = nkeys;
  std::vector<uint8_t> table(sizeof h + keys.size() * sizeof(KeySpec));
  std::memcpy(table.data(), &h, sizeof h);
  std::memcpy(table.data() + sizeof h, keys.data(), keys.size() * sizeof(KeySpec));
  return table;
}

}  // namespace gw
