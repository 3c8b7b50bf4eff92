// The fixed-capacity containers shared by the tcp, dpdk and rdma data paths (gw_slots.h),
// checked against std::list / std::deque under a long random sequence of operations.
#include <gtest/gtest.h>

#include <deque>
#include <list>
#include <memory>
#include <random>
#include <vector>

#include "gw_slots.h"

namespace gw {
namespace {

std::vector<int> contents(SlotList<int>& l) {
  std::vector<int> v;
  for (int i = l.head(); i >= 0; i = l.next(i)) v.push_back(l[i]);
  return v;
}

TEST(SlotList, FillsToCapacityAndReusesErasedNodes) {
  SlotList<int> l;
  l.init(3);
  EXPECT_FALSE(l.full());
  const int a = l.push_back(10), b = l.push_back(20), c = l.push_back(30);
  EXPECT_TRUE(l.full());
  EXPECT_EQ(contents(l), (std::vector<int>{10, 20, 30}));
  l.erase(b);  // from the middle
  EXPECT_FALSE(l.full());
  EXPECT_EQ(contents(l), (std::vector<int>{10, 30}));
  EXPECT_EQ(l.push_back(40), b);  // the freed node, appended at the tail
  EXPECT_EQ(contents(l), (std::vector<int>{10, 30, 40}));
  l.erase(a);
  l.erase(c);
  l.erase(b);
  EXPECT_EQ(l.size(), 0u);
  EXPECT_EQ(l.head(), -1);
  for (int i = 0; i < 3; ++i) l.push_back(i);
  EXPECT_TRUE(l.full());
  EXPECT_EQ(contents(l), (std::vector<int>{0, 1, 2}));
}

TEST(SlotList, MatchesAReferenceListUnderRandomUse) {
  constexpr size_t kCap = 17;
  SlotList<int> l;
  l.init(kCap);
  std::list<std::pair<int, int>> ref;  // (node, value), in order
  std::mt19937 rng(12345);
  for (int step = 0; step < 20000; ++step) {
    const bool add = ref.empty() || (ref.size() < kCap && rng() % 2 == 0);
    if (add) {
      ASSERT_FALSE(l.full());
      ref.emplace_back(l.push_back(step), step);
    } else {
      auto it = std::next(ref.begin(), static_cast<long>(rng() % ref.size()));
      l.erase(it->first);
      ref.erase(it);
    }
    ASSERT_EQ(l.full(), ref.size() == kCap);
    ASSERT_EQ(l.size(), ref.size());
    std::vector<int> want;
    for (auto& [node, v] : ref) want.push_back(v);
    ASSERT_EQ(contents(l), want) << "step " << step;
  }
}

TEST(Ring, WrapsAndMatchesADeque) {
  Ring<int> r;
  r.init(5);
  std::deque<int> ref;
  std::mt19937 rng(7);
  for (int step = 0; step < 10000; ++step) {
    if (!r.full() && (r.empty() || rng() % 2 == 0)) {
      r.push(step);
      ref.push_back(step);
    } else {
      ASSERT_EQ(r.front(), ref.front());
      r.pop();
      ref.pop_front();
    }
    ASSERT_EQ(r.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(r.at(i), ref[i]);
  }
}

// rdma keeps its early messages (which own their buffers) in a SlotList: move-only values go
// in by move, come out by move, and the list's own storage never copies them.
TEST(SlotList, HoldsMoveOnlyValues) {
  SlotList<std::unique_ptr<int>> l;
  l.init(2);
  const int a = l.push_back(std::make_unique<int>(1));
  auto two = std::make_unique<int>(2);
  const int b = l.push_back(std::move(two));
  EXPECT_EQ(two, nullptr);
  EXPECT_TRUE(l.full());
  EXPECT_EQ(*l[a], 1);
  EXPECT_EQ(*l[b], 2);
  std::unique_ptr<int> out = std::move(l[a]);
  l.erase(a);
  EXPECT_EQ(*out, 1);
  EXPECT_EQ(l.push_back(std::make_unique<int>(3)), a);  // the freed node again
  EXPECT_EQ(*l[l.head()], 2);
  EXPECT_EQ(*l[l.next(l.head())], 3);
}

}  // namespace
}  // namespace gw
