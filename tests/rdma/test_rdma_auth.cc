// Authentication of the rdma control connection (issue 24): every key combination between
// two transports on rxe0; what each side says, and that a refused peer gets no endpoint.
#include "auth_case.h"
#include "rdma_test_util.h"

namespace gw::conformance {
namespace {

TEST(RdmaAuth, OnlyTheRightKeyConnectsAndBothSidesSayWhy) {
  require_rxe();
  for (const KeyCase& k : key_cases()) {
    SCOPED_TRACE(k.name);
    auto a = open_with_key(kRxe, k.a_key), b = open_with_key(kRxe, k.b_key);
    ASSERT_TRUE(a && b);
    auto [ab, ba] = connect_pair(*a, *b, 51, Deadline(Millis(10000)));
    if (!k.right()) {
      ASSERT_FALSE(ab.ok()) << "the dialling side connected";
      ASSERT_FALSE(ba.ok()) << "the accepting side took the peer";
      expect_auth_refused(ab.status(), ba.status());
      EXPECT_EQ(b->stats()["rejected_conns"], 1u);
      continue;
    }
    ASSERT_TRUE(ab.ok() && ba.ok()) << ab.status().to_string() << " / " << ba.status().to_string();
    std::vector<uint8_t> out(100, 7), in(100);
    SendRequest s{out.data(), out.size(), 5, 1, nullptr};
    RecvRequest r{in.data(), in.size(), 5, 2, nullptr};
    ASSERT_EQ((*ba)->post_recv({&r, 1}).value(), 1u);
    ASSERT_EQ((*ab)->post_send({&s, 1}).value(), 1u);
    int done = 0;
    for (int i = 0; i < 3000 && done < 2; ++i) {
      Completion c[2];
      for (Transport* t : {a.get(), b.get()}) done += static_cast<int>(t->cq().poll(c).value());
    }
    EXPECT_EQ(done, 2);
    EXPECT_EQ(in, out);
  }
}

}  // namespace
}  // namespace gw::conformance
