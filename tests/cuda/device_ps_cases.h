/// @file device_ps_cases.h
/// Parameter-server push and pull with device buffers, written against the DeviceOps table
/// only (emulated in CI by test_device_coll.cc, CUDA in test_cuda.cc). Ranks are threads over
/// GW_TEST_PS_TRANSPORT (tests/ps/ps_harness.h).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "ps_harness.h"
#include "staging_cases.h"

namespace gw::cuda_test {

/// BSP with the sum updater is an allreduce: every worker pushes device gradients (registered,
/// and unregistered where the transport allows) and pulls each round's exact sum into device
/// buffers, checked element by element on every worker.
inline void device_ps_case(DeviceOps* ops) {
  const int servers = 1, workers = 2, rounds = 3;
  const std::vector<KeySpec> keys{{1, 3}, {2, 5000}, {3, 777}};
  auto value = [](int w, int t, uint64_t key, size_t i) {
    return static_cast<float>((w + 1) * 1000 + t * 10 + static_cast<int>((key * 31 + i) % 9));
  };
  ps_test::run_ranks(servers + workers, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = ps_test::options(servers, Consistency::kBsp, 0, 4096);
    if (rank < servers) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      Status st = (*s)->serve(ps_test::kTimeout);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ((*s)->stats().bad_requests, 0u);
      return;
    }
    auto wk = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(wk.ok()) << wk.status().to_string();
    PsWorker& w = **wk;
    const bool need_mr = g->transport().properties().requires_registration;
    std::vector<std::unique_ptr<DevMem>> in, out;
    std::vector<MemoryRegion> in_mr, out_mr;
    for (auto& k : keys) {
      in.push_back(std::make_unique<DevMem>(ops, k.count * 4));
      out.push_back(std::make_unique<DevMem>(ops, k.count * 4));
      auto span_of = [&](DevMem& d) {
        return std::span<float>(reinterpret_cast<float*>(d.get()), k.count);
      };
      auto a = w.register_memory(span_of(*in.back()));
      auto b = w.register_memory(span_of(*out.back()));
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
      EXPECT_EQ(a->kind(), MemKind::kCudaDevice);
      in_mr.push_back(std::move(*a));
      out_mr.push_back(std::move(*b));
    }
    for (int t = 0; t < rounds; ++t) {
      // Round 1 without regions where the transport allows it (found by pointer kind).
      const bool use_mr = need_mr || t != 1;
      for (size_t k = 0; k < keys.size(); ++k) {
        std::vector<float> v(keys[k].count);
        for (size_t i = 0; i < v.size(); ++i) v[i] = value(w.worker_index(), t, keys[k].key, i);
        std::vector<uint8_t> bytes(v.size() * 4);
        std::memcpy(bytes.data(), v.data(), bytes.size());
        in[k]->write(bytes);
        auto h = w.push(keys[k].key, {reinterpret_cast<const float*>(in[k]->get()), v.size()},
                        use_mr ? &in_mr[k] : nullptr);
        ASSERT_TRUE(h.ok()) << h.status().to_string();
        ASSERT_TRUE(w.wait(*h, ps_test::kTimeout).ok());
      }
      std::vector<PsHandle> hs;
      for (size_t k = 0; k < keys.size(); ++k) {
        auto h = w.pull(keys[k].key, {reinterpret_cast<float*>(out[k]->get()), keys[k].count},
                        use_mr ? &out_mr[k] : nullptr);
        ASSERT_TRUE(h.ok()) << h.status().to_string();
        hs.push_back(*h);
      }
      for (auto h : hs) {
        Status st = w.wait(h, ps_test::kTimeout);
        ASSERT_TRUE(st.ok()) << st.to_string();
      }
      for (size_t k = 0; k < keys.size(); ++k) {
        const auto got = out[k]->read();
        for (size_t i = 0; i < keys[k].count; ++i) {
          float want = 0, have = 0;
          for (int v = 0; v < workers; ++v) want += value(v, t, keys[k].key, i);
          std::memcpy(&have, got.data() + i * 4, 4);
          ASSERT_EQ(have, want) << "round " << t << " key " << keys[k].key << " [" << i << "]";
        }
      }
    }
    ASSERT_TRUE(w.finish(ps_test::kTimeout).ok());
  });
}

}  // namespace gw::cuda_test
