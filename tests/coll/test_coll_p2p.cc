// Point-to-point on the Communicator: tag matching, any-source receives, interleaving with
// collectives (which keep their numbering), bad peers.
#include "coll_harness.h"

namespace gw::coll_test {
namespace {

TEST(CollP2p, SendRecvTagsAnySourceAndCollectivesInterleaved) {
  run_ranks(3, small_chunks(), [](int r, std::unique_ptr<Rank>& rk) {
    Communicator& c = *rk->comm;
    const Nanos t = Millis(20000);
    if (r != 0) {
      // Two tags sent in the opposite order to the receives' posting order; then a message
      // for rank 0's any-source receive.
      std::vector<int32_t> a(1000, 10 * r + 1), b(3, 10 * r + 2);
      auto hb = c.send_async(b.data(), b.size() * 4, 0, 7);
      auto ha = c.send_async(a.data(), a.size() * 4, 0, 5);
      ASSERT_TRUE(ha.ok() && hb.ok());
      ASSERT_TRUE(c.wait(*ha, t).ok());
      ASSERT_TRUE(c.wait(*hb, t).ok());
    } else {
      for (int p = 1; p < 3; ++p) {
        std::vector<int32_t> a(1000), b(3);
        auto ha = c.recv_async(a.data(), a.size() * 4, p, 5);
        auto hb = c.recv_async(b.data(), b.size() * 4, p, 7);
        ASSERT_TRUE(ha.ok() && hb.ok());
        ASSERT_TRUE(c.wait(*ha, t).ok());
        ASSERT_TRUE(c.wait(*hb, t).ok());
        EXPECT_EQ(a[999], 10 * p + 1);
        EXPECT_EQ(b[2], 10 * p + 2);
      }
    }
    // A collective between point-to-point calls on some ranks only.
    std::vector<int64_t> x(10, r + 1);
    ASSERT_TRUE(c.allreduce(x.data(), x.data(), x.size(), DataType::kInt64, ReduceOp::kSum).ok());
    EXPECT_EQ(x[9], 6);
    int v = 100 + r, got = -1, src = -1;
    if (r == 2) {
      ASSERT_TRUE(c.wait(*c.send_async(&v, 4, 0, 9), t).ok());
    }
    if (r == 0) {
      auto h = c.recv_async(&got, 4, -1, 9, &src);
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(c.wait(*h, t).ok());
      EXPECT_EQ(got, 102);
      EXPECT_EQ(src, 2);
    }
    EXPECT_EQ(c.send_async(&v, 4, r, 1).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(c.recv_async(&v, 4, 3, 1).status().code(), Code::kInvalidArgument);
    ASSERT_TRUE(c.barrier().ok());
  });
}

// A message longer than the receive fails only that receive (its length reported, nothing
// written past the buffer); the communicator carries on with collectives and messages, and a
// receive can be in flight while a collective runs.
TEST(CollP2p, TooLongMessageFailsOnlyThatReceive) {
  run_ranks(2, small_chunks(), [](int r, std::unique_ptr<Rank>& rk) {
    Communicator& c = *rk->comm;
    const Nanos t = Millis(20000);
    std::vector<uint8_t> big(100, 7);
    if (r == 1) {
      ASSERT_TRUE(c.wait(*c.send_async(big.data(), big.size(), 0, 3), t).ok());
    } else {
      std::vector<uint8_t> small(11, 0xEE);  // 10 usable bytes and a guard byte
      size_t len = 0;
      auto h = c.recv_async(small.data(), 10, 1, 3, nullptr, &len);
      ASSERT_TRUE(h.ok());
      Status st = c.wait(*h, t);
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.to_string();
      EXPECT_NE(st.to_string().find("100-byte"), std::string::npos) << st.to_string();
      EXPECT_EQ(len, 100u);
      EXPECT_EQ(small[10], 0xEE) << "written past the buffer";
      EXPECT_TRUE(c.status().ok()) << c.status().to_string();
    }
    // Still usable: a receive posted before a collective, finished after it.
    int v = 40 + r, got = -1;
    size_t len = 0;
    auto hr = c.recv_async(&got, 4, 1 - r, 4, nullptr, &len);
    ASSERT_TRUE(hr.ok());
    std::vector<int64_t> x(1000, r + 1);
    ASSERT_TRUE(c.allreduce(x.data(), x.data(), x.size(), DataType::kInt64, ReduceOp::kSum).ok());
    for (int64_t e : x) ASSERT_EQ(e, 3);
    ASSERT_TRUE(c.wait(*c.send_async(&v, 4, 1 - r, 4), t).ok());
    ASSERT_TRUE(c.wait(*hr, t).ok());
    EXPECT_EQ(got, 40 + (1 - r));
    EXPECT_EQ(len, 4u);
    ASSERT_TRUE(c.barrier().ok());
  });
}

}  // namespace
}  // namespace gw::coll_test
