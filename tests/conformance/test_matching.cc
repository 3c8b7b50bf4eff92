// Conformance of matching: tags posted in another order than sent, kAnyTag, any-source.
#include <random>

#include "conformance.h"

namespace gw::conformance {
namespace {

// Independent reference of the matching rule of gw_transport.h: each message, in send order,
// goes to the first receive (in posting order) not yet matched whose tag matches. For one
// sender this gives the same answer whether messages or receives come first.
// @return for each receive the index of its message, or -1.
std::vector<int> reference_match(const std::vector<uint64_t>& send_tags,
                                 const std::vector<uint64_t>& recv_tags) {
  std::vector<int> got(recv_tags.size(), -1);
  for (size_t m = 0; m < send_tags.size(); ++m) {
    for (size_t r = 0; r < recv_tags.size(); ++r) {
      if (got[r] < 0 && (recv_tags[r] == kAnyTag || recv_tags[r] == send_tags[m])) {
        got[r] = static_cast<int>(m);
        break;
      }
    }
  }
  return got;
}

struct TagPlan {
  std::vector<uint64_t> send_tags, recv_tags;
  std::vector<int> match;  // receive -> message
};

// Random tags (including 64-bit ones), the receives a shuffle of them with some kAnyTag,
// redrawn until every receive gets a message.
TagPlan make_plan(uint32_t seed, size_t count) {
  const uint64_t pool[] = {0, 1, 2, 3, 4, uint64_t{1} << 63, kAnyTag - 1};
  std::mt19937 rng(seed);
  TagPlan p;
  for (size_t i = 0; i < count; ++i) p.send_tags.push_back(pool[rng() % std::size(pool)]);
  for (int attempt = 0;; ++attempt) {
    p.recv_tags = p.send_tags;
    std::shuffle(p.recv_tags.begin(), p.recv_tags.end(), rng);
    if (attempt < 100) {
      for (auto& t : p.recv_tags) t = rng() % 4 == 0 ? kAnyTag : t;
    }
    p.match = reference_match(p.send_tags, p.recv_tags);
    if (std::find(p.match.begin(), p.match.end(), -1) == p.match.end()) return p;
  }
}

size_t tag_len(size_t i) { return (i * 97) % 3000 + (i % 5 == 0 ? 70000 : 0); }

using Matching = TransportTest;

// Rank 1 sends; rank 0 posts receives with the tags in another order, some kAnyTag. Round 0
// posts before the messages are sent, round 1 after they arrived (unexpected messages).
TEST_P(Matching, TagsInAnotherOrderAndAnyTag) {
  constexpr size_t kCount = 64;
  run_ranks(tc(), 2, [&](Group& g) {
    for (int round = 0; round < 2; ++round) {
      const TagPlan plan = make_plan(1234 + round, kCount);
      const std::string r = std::to_string(round);
      Exchange x(g);
      if (g.rank() == 1) {
        await(g, "go" + r);
        for (size_t i = 0; i < kCount; ++i) x.send(0, plan.send_tags[i], tag_len(i), i);
        Status s = x.run();
        ASSERT_TRUE(s.ok()) << s.to_string();
        x.verify();
        ASSERT_TRUE(g.store().set("sent" + r, "1").ok());
        continue;
      }
      for (size_t j = 0; j < kCount; ++j) {
        size_t m = static_cast<size_t>(plan.match[j]);
        size_t i = x.recv(1, plan.recv_tags[j], tag_len(m) + 8, m, tag_len(m));
        x.reqs()[i].exp_tag = plan.send_tags[m];
      }
      if (round == 0) {
        Status s = x.post();
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_TRUE(g.store().set("go" + r, "1").ok());
      } else {
        ASSERT_TRUE(g.store().set("go" + r, "1").ok());
        await(g, "sent" + r);
        std::array<Completion, 4> out;
        auto n = g.transport().cq().wait(out, Millis(50));  // let them land unexpected
        ASSERT_FALSE(n.ok()) << "completion before any receive was posted";
      }
      Status s = x.run();
      ASSERT_TRUE(s.ok()) << s.to_string();
      x.verify();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Tr, Matching, ::testing::ValuesIn(built_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Matching);

using AnySource = RanksTest;

size_t any_len(int src, uint64_t seq) { return (static_cast<size_t>(src) * 131 + seq * 17) % 3000; }

// Checks the any-source receives of `x` in posting order: each names a real peer and its
// endpoint, and each peer's messages arrive in its send order (tag base + seq).
void verify_any(Group& g, Exchange& x, uint64_t tag_base, bool tag_is_seq, int per_peer) {
  std::vector<int> next(g.size(), 0);
  for (const Req& r : x.reqs()) {
    if (!r.any_source) continue;
    ASSERT_TRUE(r.done);
    int p = static_cast<int>(r.c.peer_id);
    ASSERT_TRUE(p > 0 && p < g.size()) << "any-source completion names peer " << p;
    EXPECT_EQ(r.c.ep, &g.endpoint(p)) << "completion's endpoint is not the one of peer " << p;
    uint64_t seq = static_cast<uint64_t>(next[p]++);
    uint64_t tag = tag_is_seq ? tag_base + seq : tag_base;
    Exchange::verify_recv(r, p, 0, tag, seq, any_len(p, seq));
  }
  for (int p = 1; p < g.size(); ++p) EXPECT_EQ(next[p], per_peer) << "messages from rank " << p;
}

TEST_P(AnySource, AnyTagFromEveryPeerInOrder) {
  constexpr int kPerPeer = 20;
  run_ranks(tc(), ranks(), [&](Group& g) {
    Exchange x(g);
    if (g.rank() == 0) {
      for (int i = 0; i < (g.size() - 1) * kPerPeer; ++i) x.recv_any(kAnyTag, 3000);
    } else {
      for (uint64_t s = 0; s < kPerPeer; ++s) x.send(0, 1000 + s, any_len(g.rank(), s), s);
    }
    Status st = x.run();
    ASSERT_TRUE(st.ok()) << st.to_string();
    x.verify();
    if (g.rank() == 0) verify_any(g, x, 1000, true, kPerPeer);
  });
}

// Tag 7 goes to any-source receives, tag 8 to per-endpoint ones, interleaved by the senders.
TEST_P(AnySource, MixedWithEndpointReceives) {
  constexpr int kPerPeer = 16;
  run_ranks(tc(), ranks(), [&](Group& g) {
    Exchange x(g);
    if (g.rank() == 0) {
      for (int p = 1; p < g.size(); ++p) {
        for (uint64_t s = 0; s < kPerPeer; ++s) x.recv(p, 8, 2000, s, (s * 29) % 2000);
      }
      for (int i = 0; i < (g.size() - 1) * kPerPeer; ++i) x.recv_any(7, 3000);
    } else {
      for (uint64_t s = 0; s < kPerPeer; ++s) {
        x.send(0, 7, any_len(g.rank(), s), s);
        x.send(0, 8, (s * 29) % 2000, s);
      }
    }
    Status st = x.run();
    ASSERT_TRUE(st.ok()) << st.to_string();
    x.verify();
    if (g.rank() == 0) verify_any(g, x, 7, false, kPerPeer);
  });
}

INSTANTIATE_TEST_SUITE_P(Tr, AnySource,
                         ::testing::Combine(::testing::ValuesIn(built_cases()),
                                            ::testing::Values(3, 5, 8)),
                         ranks_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AnySource);

}  // namespace
}  // namespace gw::conformance
