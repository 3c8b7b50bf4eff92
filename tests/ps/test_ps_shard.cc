// Sharding on live servers, k = 1..4: every element of every key is held by exactly one
// server, a worker's pull reassembles each key from its parts, and a BSP round updates every
// element once. Keys of mixed sizes; the large ones are cut across servers.
#include <mutex>

#include "ps_harness.h"

namespace gw::ps_test {
namespace {

float init_value(uint64_t key, uint64_t e) { return static_cast<float>(key * 100000 + e); }
float push_value(int worker, uint64_t key, uint64_t e) {
  return static_cast<float>((worker + 1) * 1000 + static_cast<int>((key + e) % 97));
}

class PsShard : public ::testing::TestWithParam<int> {};

TEST_P(PsShard, EveryElementOnOneServerAndUpdatedOnce) {
  const int servers = GetParam();
  const int workers = std::min(2, max_ranks() - servers);
  GW_PS_NEED_RANKS(servers + 1);
  // 20000 floats in all, laid out in key order; min part 256 elements: key 3 (elements
  // [1, 16001) of the sequence) is cut once per server; keys 1 and 9 are never cut.
  const std::vector<KeySpec> keys{{9, 7}, {3, 16000}, {1, 1}, {5, 2000}, {7, 1992}};
  std::vector<std::vector<int>> held(keys.size());
  std::vector<std::vector<float>> final_values(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    held[k].assign(keys[k].count, 0);
    final_values[k].assign(keys[k].count, NAN);
  }
  std::mutex mu;
  run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(servers, Consistency::kBsp, 0, 256 * 4);
    if (rank < servers) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater(),
                                [](uint64_t key, uint64_t off, std::span<float> out) {
                                  for (size_t i = 0; i < out.size(); ++i)
                                    out[i] = init_value(key, off + i);
                                });
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      Status st = (*s)->serve(kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const PsLayout& l = (*s)->layout();
      EXPECT_GT(l.elements_on(rank), 0u) << "server " << rank << " holds nothing";
      std::lock_guard<std::mutex> lk(mu);
      for (uint32_t id = 0; id < l.parts().size(); ++id) {
        auto v = (*s)->part_values(id);
        const PsPart& p = l.parts()[id];
        EXPECT_EQ(v.ok(), p.server == static_cast<uint32_t>(rank)) << "part " << id;
        if (!v.ok()) continue;
        for (uint64_t i = 0; i < p.count; ++i) {
          ++held[p.key_index][p.offset + i];
          final_values[p.key_index][p.offset + i] = (*v)[i];
        }
      }
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    if (servers > 1) {
      EXPECT_EQ(w.layout().num_parts(1), static_cast<uint32_t>(servers));
    }
    std::vector<float> buf;
    for (const KeySpec& k : keys) {  // clock 0: the initial values, reassembled
      buf.assign(k.count, NAN);
      auto h = w.pull(k.key, buf);
      ASSERT_TRUE(h.ok() && w.wait(*h, kTimeout).ok());
      for (uint64_t e = 0; e < k.count; ++e)
        ASSERT_EQ(buf[e], init_value(k.key, e)) << "key " << k.key << " [" << e << "]";
    }
    for (const KeySpec& k : keys) {
      buf.resize(k.count);
      for (uint64_t e = 0; e < k.count; ++e) buf[e] = push_value(w.worker_index(), k.key, e);
      auto h = w.push(k.key, buf);
      ASSERT_TRUE(h.ok() && w.wait(*h, kTimeout).ok());
    }
    ASSERT_TRUE(w.finish(kTimeout).ok());
  });
  for (size_t k = 0; k < keys.size(); ++k) {
    for (uint64_t e = 0; e < keys[k].count; ++e) {
      ASSERT_EQ(held[k][e], 1) << "key " << keys[k].key << " element " << e;
      float want = 0;  // a BSP round with the sum updater sets the sum of the round
      for (int v = 0; v < workers; ++v) want += push_value(v, keys[k].key, e);
      ASSERT_EQ(final_values[k][e], want) << "key " << keys[k].key << " element " << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Servers, PsShard, ::testing::Values(1, 2, 3, 4),
                         [](const auto& tp) { return std::to_string(tp.param) + "servers"; });

}  // namespace
}  // namespace gw::ps_test
