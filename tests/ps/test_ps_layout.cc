// Sharding: every element of every key is held by exactly one server, pieces are contiguous,
// large keys are cut so servers carry an even load, small keys are never cut.
#include <gtest/gtest.h>

#include <random>

#include "gw_ps_layout.h"

namespace gw {
namespace {

void check_cover(const PsLayout& l, int servers) {
  const auto& keys = l.keys();
  std::vector<std::vector<int>> held(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) held[k].assign(keys[k].count, 0);
  std::vector<uint64_t> load(static_cast<size_t>(servers), 0);
  for (uint32_t ki = 0; ki < keys.size(); ++ki) {
    uint64_t next = 0;
    for (uint32_t i = 0; i < l.num_parts(ki); ++i) {
      const PsPart& p = l.parts()[l.first_part(ki) + i];
      ASSERT_EQ(p.key_index, ki);
      ASSERT_LT(p.server, static_cast<uint32_t>(servers));
      ASSERT_EQ(p.offset, next) << "parts of key " << keys[ki].key << " not in order";
      ASSERT_GT(p.count, 0u);
      next = p.offset + p.count;
      ASSERT_LE(next, keys[ki].count);
      for (uint64_t e = p.offset; e < next; ++e) ++held[ki][e];
      load[p.server] += p.count;
      if (l.num_parts(ki) > 1) {
        EXPECT_GE(p.count, l.min_part());
      }
    }
  }
  uint64_t total = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    total += keys[k].count;
    for (uint64_t e = 0; e < keys[k].count; ++e)
      ASSERT_EQ(held[k][e], 1) << "key " << keys[k].key << " element " << e;
  }
  uint64_t parts_total = 0;
  for (const PsPart& p : l.parts()) parts_total += p.count;
  EXPECT_EQ(parts_total, total);
  for (int s = 0; s < servers; ++s) EXPECT_EQ(l.elements_on(s), load[static_cast<size_t>(s)]);
}

TEST(PsLayout, CoversEveryKeyOnceForOneToFourServers) {
  std::mt19937 rng(7);
  for (int servers = 1; servers <= 4; ++servers) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<KeySpec> keys;
      const int nkeys = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < nkeys; ++i) {
        // Mixed sizes: tiny, medium and large tensors; keys not in order.
        uint64_t count = 1 + rng() % (i % 3 == 0 ? 5000 : 40);
        keys.push_back({static_cast<uint64_t>(1000 - i * 7), count});
      }
      auto l = PsLayout::make(keys, servers, 1 + rng() % 64);
      ASSERT_TRUE(l.ok()) << l.status().to_string();
      SCOPED_TRACE("servers=" + std::to_string(servers) + " trial=" + std::to_string(trial));
      check_cover(*l, servers);
    }
  }
}

TEST(PsLayout, LargeKeyIsSpreadEvenly) {
  for (int servers = 1; servers <= 4; ++servers) {
    std::vector<KeySpec> keys{{5, 100000}, {1, 10}, {9, 3}};
    auto l = PsLayout::make(keys, servers, 256);
    ASSERT_TRUE(l.ok());
    check_cover(*l, servers);
    const uint64_t even = l->total_elements() / static_cast<uint64_t>(servers);
    for (int s = 0; s < servers; ++s) {
      EXPECT_LE(l->elements_on(s), even + 256 + 13) << "server " << s;
      EXPECT_GE(l->elements_on(s) + 256 + 13, even) << "server " << s;
    }
    EXPECT_EQ(l->num_parts(0), static_cast<uint32_t>(servers)) << "key 5 cut once per server";
    EXPECT_EQ(l->num_parts(1), 1u);
    EXPECT_EQ(l->num_parts(2), 1u);
  }
}

TEST(PsLayout, KeyRangesFollowKeyOrder) {
  std::vector<KeySpec> keys;
  for (uint64_t k = 0; k < 8; ++k) keys.push_back({100 - k, 100});
  auto l = PsLayout::make(keys, 4, 1000);  // never cut: whole keys, two per server
  ASSERT_TRUE(l.ok());
  for (uint32_t ki = 0; ki < keys.size(); ++ki) {
    ASSERT_EQ(l->num_parts(ki), 1u);
    // Sorted keys 93..100: the lowest two on server 0, and so on.
    EXPECT_EQ(l->parts()[l->first_part(ki)].server, (keys[ki].key - 93) / 2) << keys[ki].key;
  }
}

TEST(PsLayout, RejectsBadTables) {
  std::vector<KeySpec> dup{{1, 4}, {1, 8}};
  auto a = PsLayout::make(dup, 2, 1);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().to_string().find("key 1 is declared twice"), std::string::npos);
  std::vector<KeySpec> zero{{3, 0}};
  auto b = PsLayout::make(zero, 1, 1);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().to_string().find("key 3 has 0 elements"), std::string::npos);
  EXPECT_FALSE(PsLayout::make({}, 1, 1).ok());
  std::vector<KeySpec> one{{1, 4}};
  EXPECT_EQ(PsLayout::make(one, 0, 1).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace gw
