// close_then_receive (conformance.h): what a peer sent before it left cleanly stays receivable.
#include "conformance.h"

namespace gw::conformance {
namespace {

// Polls `g` until `want` completions (or an endpoint error when want == 0) or 10 s.
std::vector<Completion> pump(Group& g, size_t want, bool until_endpoint_error = false) {
  std::vector<Completion> seen;
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < end) {
    Completion c[8];
    auto n = g.transport().cq().poll(c);
    if (!n.ok()) break;
    for (size_t k = 0; k < *n; ++k) seen.push_back(c[k]);
    if (until_endpoint_error) {
      for (auto& x : seen)
        if (x.op == Op::kEndpointError) return seen;
    } else if (seen.size() >= want) {
      return seen;
    }
  }
  return seen;
}

}  // namespace

void close_then_receive(const TransportCase& tc) {
  auto groups = make_groups(tc, 2);
  ASSERT_EQ(groups.size(), 2u);
  const size_t sizes[] = {0, 10, 100000, 3 << 20};
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < 4; ++i) {
    out.emplace_back(sizes[i]);
    fill_pattern(out[i].data(), sizes[i], msg_seed(1, 0, i, 0));
    SendRequest s{out[i].data(), sizes[i], i, i, nullptr};
    ASSERT_EQ(taken(groups[1]->endpoint(0).post_send({&s, 1})), 1u);
  }
  // Both sides progress until every send is written (rank 0 buffers what it reads).
  size_t sent = 0;
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (sent < 4 && Clock::now() < end) {
    Completion c[8];
    auto n = groups[1]->transport().cq().poll(c);
    ASSERT_TRUE(n.ok());
    for (size_t k = 0; k < *n; ++k) {
      ASSERT_EQ(c[k].code, Code::kOk);
      ++sent;
    }
    (void)groups[0]->transport().cq().poll(c);
  }
  ASSERT_EQ(sent, 4u);
  groups[1].reset();  // rank 1 leaves: its sockets close
  auto seen = pump(*groups[0], 0, true);
  ASSERT_FALSE(seen.empty()) << "no endpoint error after the peer closed";
  EXPECT_EQ(seen.back().op, Op::kEndpointError);
  Endpoint& ep = groups[0]->endpoint(1);
  std::vector<std::vector<uint8_t>> in;
  for (size_t i = 0; i < 4; ++i) {
    in.emplace_back(sizes[i] + kGuard, kGuardByte);
    RecvRequest r{in[i].data(), sizes[i], i, 10 + i, nullptr};
    ASSERT_EQ(taken(ep.post_recv({&r, 1})), 1u)
        << "message " << i << ": " << ep.status().to_string();
  }
  auto got = pump(*groups[0], 4);
  ASSERT_EQ(got.size(), 4u);
  for (auto& c : got) {
    ASSERT_EQ(c.op, Op::kRecv);
    ASSERT_EQ(c.code, Code::kOk);
    const size_t i = c.wr_id - 10;
    ASSERT_LT(i, 4u);
    EXPECT_EQ(c.len, sizes[i]);
    EXPECT_EQ(check_pattern(in[i].data(), sizes[i], msg_seed(1, 0, i, 0)), "") << "message " << i;
    EXPECT_EQ(in[i][sizes[i]], kGuardByte);
  }
  uint8_t more[8];
  RecvRequest r{more, sizeof more, 9, 99, nullptr};
  auto again = ep.post_recv({&r, 1});
  ASSERT_FALSE(again.ok()) << "a receive after the last buffered message must fail";
  EXPECT_NE(again.status().to_string().find("closed"), std::string::npos)
      << again.status().to_string();
}

}  // namespace gw::conformance
