// Every collective and send/recv on device buffers, on the emulated device table (memory the
// CPU cannot touch, copies and reductions that finish late) with the CPU kernels as the device
// reducer: the engines' choices, staging and ordering, checked element by element on every
// rank; a rank with host buffers among device ones failing every rank at once; and the
// parameter server's push/pull of device buffers. Runs in CI over TCP and over the dpdk ring
// bus (meson.build); test_cuda.cc runs the same cases on a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "device_coll_cases.h"
#include "device_ps_cases.h"
#include "emulated_device_ops.h"

namespace gw::cuda_test {
namespace {

class DeviceColl : public ::testing::TestWithParam<int> {
 protected:
  EmulatedDeviceOps ops_{2};
  ScopedDeviceOps scope_{&ops_};
};

TEST_P(DeviceColl, Allreduce) {
  device_allreduce_cases(&ops_, GetParam());
  EXPECT_GT(ops_.reductions(), 0) << "the device ring never ran";
}

TEST_P(DeviceColl, FusedBucket) { device_bucket_cases(&ops_, GetParam()); }

TEST_P(DeviceColl, ReduceScatterAllgatherBroadcastP2p) { device_other_cases(&ops_, GetParam()); }

TEST_P(DeviceColl, HostAmongDeviceFailsEveryRank) { device_mismatch_cases(&ops_, GetParam()); }

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceColl, ::testing::Values(2, 3),
                         [](const auto& i) { return std::to_string(i.param) + "ranks"; });

// The transport's own staging on a pair (GW_TEST_STAGING_SPEC; the dpdk row injects loss and
// reordering, so packets of device messages land out of order and windows are resent): every
// direction and size, buffered early, many in flight with fewer slots than chunks.
TEST(StagingPair, DeviceMessages) {
  const char* env = std::getenv("GW_TEST_STAGING_SPEC");
  const std::string spec =
      env && *env ? env : "tcp:iface=lo,staging_chunk_bytes=4096,staging_slots=3";
  EmulatedDeviceOps ops(2);
  ScopedDeviceOps scope(&ops);
  auto pair = Pair::make(spec);
  ASSERT_NE(pair, nullptr) << spec;
  uint32_t seed = 1;
  for (size_t len : {size_t{1}, size_t{300}, size_t{4097}, size_t{70001}}) {
    for (auto [from, to] :
         {std::pair{Where::kDevice, Where::kDevice}, std::pair{Where::kHost, Where::kDevice},
          std::pair{Where::kDevice, Where::kHost}}) {
      SCOPED_TRACE(spec + ": len " + std::to_string(len));
      one_message(&ops, *pair, len, from, to, true, seed++);
    }
  }
  one_message(&ops, *pair, 10000, Where::kDevice, Where::kDevice, false, 77);
  many_messages(&ops, *pair, 12, 9000);
  auto st = pair->a->stats();
  EXPECT_GT(st["staged_tx_bytes"], 0u);
  EXPECT_GT(pair->b->stats()["staged_rx_bytes"], 0u);
}

TEST(DevicePs, PushPullBsp) {
  EmulatedDeviceOps ops(2);
  ScopedDeviceOps scope(&ops);
  device_ps_case(&ops);
}

TEST(DeviceCollNoReducer, SaysWhy) {
  EmulatedDeviceOps ops(2, /*reduce=*/false);
  ScopedDeviceOps scope(&ops);
  coll_test::run_ranks(2, device_opts(), [&](int, std::unique_ptr<coll_test::Rank>& rk) {
    DevMem a(&ops, 8000), b(&ops, 4000);
    Status st =
        rk->comm->reduce_scatter(a.get(), b.get(), 1000, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(st.code(), Code::kNotSupported) << st.to_string();
  });
}

}  // namespace
}  // namespace gw::cuda_test
