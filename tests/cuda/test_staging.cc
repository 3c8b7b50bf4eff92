// Staging pipeline logic on the emulated device table (host memory that faults when touched
// directly; copies that finish late): the pool's back-pressure and ordering, and TCP moving
// "device" memory bit-exactly in every direction, buffered early, many in flight, striped.
// Runs everywhere (CI has no GPU); the same TCP cases run on CUDA in test_cuda.cc.
#include <gtest/gtest.h>

#include "emulated_device_ops.h"
#include "gw_staging.h"
#include "staging_cases.h"

namespace gw::cuda_test {
namespace {

TEST(StagingPool, BackPressureOrderAndLimits) {
  EmulatedDeviceOps ops(3);
  auto pool = StagingPool::create(&ops, {4096, 2}, "test");
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  StagingPool& p = **pool;
  EXPECT_EQ(p.chunk_bytes(), 4096u);
  DevMem d(&ops, 8192);
  d.write(pattern(8192, 1));
  const int s0 = p.acquire(), s1 = p.acquire();
  ASSERT_GE(s0, 0);
  ASSERT_GE(s1, 0);
  EXPECT_EQ(p.acquire(), -1) << "a full pool must push back";
  ASSERT_TRUE(p.stage_out(s0, d.get(), 4096).ok());
  ASSERT_TRUE(p.stage_out(s1, d.get() + 4096, 4096).ok());
  // Copies finish late (the emulation's lag) and in order within a direction.
  EXPECT_FALSE(p.ready(s1).value());
  EXPECT_FALSE(p.ready(s0).value());
  EXPECT_FALSE(p.ready(s0).value());
  EXPECT_TRUE(p.ready(s0).value());
  const auto want = pattern(8192, 1);
  EXPECT_EQ(std::memcmp(p.data(s0), want.data(), 4096), 0);
  EXPECT_FALSE(p.ready(s1).value());
  EXPECT_TRUE(p.ready(s1).value());
  EXPECT_EQ(std::memcmp(p.data(s1), want.data() + 4096, 4096), 0);
  p.release(s0);
  EXPECT_EQ(p.acquire(), s0);
  Status big = p.stage_out(s0, d.get(), 4097);
  EXPECT_EQ(big.code(), Code::kInvalidArgument) << big.to_string();
  // Host -> device through a slot.
  std::memset(p.data(s0), 0x5A, 4096);
  ASSERT_TRUE(p.stage_in(s0, d.get() + 100, 4096).ok());
  while (!p.ready(s0).value()) {
  }
  auto back = d.read();
  EXPECT_EQ(back[99], want[99]);
  EXPECT_EQ(back[100], 0x5A);
  EXPECT_EQ(back[4195], 0x5A);
  EXPECT_EQ(back[4196], want[4196]);
  EXPECT_EQ(p.bytes_out(), 8192u);
  EXPECT_EQ(p.bytes_in(), 4096u);
  EXPECT_EQ(StagingPool::create(&ops, {0, 2}, "test").status().code(), Code::kInvalidArgument);
}

class TcpStaging : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    // Small slots and few of them: every message of a few KiB is cut into several chunks and
    // the slots run out (back-pressure) while messages are in flight.
    pair_ = Pair::make("tcp:iface=lo,staging_chunk_bytes=4096,staging_slots=3,streams=" +
                       std::to_string(GetParam()));
    ASSERT_NE(pair_, nullptr);
  }
  EmulatedDeviceOps ops_{2};
  ScopedDeviceOps scope_{&ops_};
  std::unique_ptr<Pair> pair_;
};

TEST_P(TcpStaging, EveryDirectionAndSize) {
  uint32_t seed = 1;
  for (size_t len :
       {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{14000}, size_t{300000}}) {
    for (auto [from, to] :
         {std::pair{Where::kDevice, Where::kDevice}, std::pair{Where::kHost, Where::kDevice},
          std::pair{Where::kDevice, Where::kHost}}) {
      SCOPED_TRACE("len " + std::to_string(len) + (from == Where::kDevice ? " dev" : " host") +
                   (to == Where::kDevice ? "->dev" : "->host"));
      one_message(&ops_, *pair_, len, from, to, true, seed++);
    }
  }
  auto st = pair_->a->stats();
  EXPECT_GT(st["staged_tx_bytes"], 0u);
  EXPECT_GT(pair_->b->stats()["staged_rx_bytes"], 0u);
}

TEST_P(TcpStaging, ArrivesBeforeItsDeviceReceive) {
  one_message(&ops_, *pair_, 10000, Where::kDevice, Where::kDevice, false, 7);
  one_message(&ops_, *pair_, 3, Where::kHost, Where::kDevice, false, 8);
}

TEST_P(TcpStaging, ManyInFlight) { many_messages(&ops_, *pair_, 24, 9000); }

INSTANTIATE_TEST_SUITE_P(Streams, TcpStaging, ::testing::Values(1, 3),
                         [](const auto& i) { return "streams" + std::to_string(i.param); });

TEST(TcpStagingNoDevice, RegisterSaysWhy) {
  ScopedDeviceOps none(nullptr);
  auto t = Transport::open("tcp:iface=lo");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  int x = 0;
  auto mr = (*t)->register_memory(&x, sizeof x, MemKind::kCudaDevice);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(mr.status().code(), Code::kNotSupported);
  EXPECT_NE(mr.status().message().find("device memory"), std::string_view::npos)
      << mr.status().to_string();
}

}  // namespace
}  // namespace gw::cuda_test
