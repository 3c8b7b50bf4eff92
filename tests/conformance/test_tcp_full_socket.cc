// tcp: a peer that stops reading fills the socket. Small frames, written one at a time (through
// the driver's send() pack), then wait for room, and every one arrives whole, once and in its
// stream's order when the peer reads again; every send completes OK.
#include <poll.h>

#include <array>
#include <map>
#include <thread>

#include "conformance.h"
#include "raw_peer.h"

namespace gw::conformance {
namespace {

using drv::tcp::FrameHeader;

using TcpFullSocket = TransportTest;

// Polls `t` into `seen` until it holds `want` completions or `timeout` passed (0: one poll).
void drain_until(Transport& t, std::vector<Completion>& seen, size_t want, Nanos timeout) {
  Deadline d(timeout);
  std::array<Completion, 16> out;
  do {
    auto n = t.cq().poll(out);
    if (!n.ok()) return;
    seen.insert(seen.end(), out.begin(), out.begin() + static_cast<long>(*n));
  } while (seen.size() < want && !d.expired());
}

TEST_P(TcpFullSocket, SmallFramesWaitForRoomAndArriveWhole) {
  auto t = open_case(GetParam());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  uint16_t port = 0;
  RawFd lfd = raw_listen(decode((*t)->address()), port);
  ASSERT_GE(lfd.get(), 0);
  std::vector<RawFd> raw;
  std::thread peer([&] { raw = accept_streams(lfd.get(), nullptr, kStepTimeout); });
  Deadline dl(kStepTimeout);
  auto ep = (*t)->connect({with_port((*t)->address(), port), 11, true, 1, "raw peer"}, dl);
  peer.join();
  ASSERT_TRUE(ep.ok()) << ep.status().to_string();
  ASSERT_FALSE(raw.empty());

  constexpr size_t kLen = 64, kMaxMsgs = 1 << 20, kQueued = 8;
  std::array<std::array<uint8_t, kLen>, 16> bufs;
  std::vector<Completion> seen;
  auto post = [&](uint64_t i) {
    fill_pattern(bufs[i % bufs.size()].data(), kLen, msg_seed(0, 1, 9, i));
    SendRequest s{bufs[i % bufs.size()].data(), kLen, 9, i, nullptr};
    auto n = (*ep)->post_send({&s, 1});
    return n.ok() && *n == 1;
  };
  // One message at a time until one finds no room (the peer never reads meanwhile).
  uint64_t sent = 0;
  bool stalled = false;
  while (!stalled && sent < kMaxMsgs) {
    ASSERT_TRUE(post(sent)) << "message " << sent;
    const size_t before = seen.size();
    Deadline d(Millis(20));
    std::array<Completion, 4> out;
    while (seen.size() == before && !d.expired()) {
      auto n = (*t)->cq().poll(out);
      ASSERT_TRUE(n.ok()) << n.status().to_string();
      seen.insert(seen.end(), out.begin(), out.begin() + static_cast<long>(*n));
    }
    stalled = seen.size() == before;
    ++sent;
  }
  ASSERT_TRUE(stalled) << kMaxMsgs << " messages of " << kLen << " B never filled the socket";
  for (size_t k = 0; k < kQueued; ++k, ++sent) ASSERT_TRUE(post(sent)) << "queued " << sent;

  // The peer reads again: every frame, from whichever stream carries it.
  std::map<uint64_t, int> got;  // seq -> times seen
  std::vector<uint64_t> last(raw.size(), 0);
  std::vector<bool> any(raw.size(), false);
  Deadline rd(kStepTimeout);
  while (got.size() < sent && !rd.expired()) {
    std::vector<pollfd> p;
    for (auto& r : raw) p.push_back({r.get(), POLLIN, 0});
    ::poll(p.data(), p.size(), 1);
    for (size_t k = 0; k < p.size(); ++k) {
      if (!(p[k].revents & POLLIN)) continue;
      FrameHeader h{};
      ASSERT_TRUE(raw_read(p[k].fd, &h, sizeof h, **t, seen, kStepTimeout));
      ASSERT_EQ(h.magic, drv::tcp::kMagic);
      ASSERT_EQ(h.tag, 9u);
      ASSERT_EQ(h.msg_len, kLen);
      ASSERT_EQ(h.chunk_len, kLen);
      ASSERT_LT(h.seq, sent);
      if (any[k]) {
        EXPECT_GT(h.seq, last[k]) << "stream " << k << " out of order";
      }
      any[k] = true;
      last[k] = h.seq;
      std::array<uint8_t, kLen> payload;
      ASSERT_TRUE(raw_read(p[k].fd, payload.data(), kLen, **t, seen, kStepTimeout));
      EXPECT_EQ(check_pattern(payload.data(), kLen, msg_seed(0, 1, 9, h.seq)), "")
          << "message " << h.seq;
      ++got[h.seq];
    }
    drain_until(**t, seen, sent, Millis(0));
  }
  ASSERT_EQ(got.size(), sent) << "messages that reached the peer";
  for (auto [seq, times] : got) {
    EXPECT_EQ(times, 1) << "message " << seq;
  }
  drain_until(**t, seen, sent, kStepTimeout);
  ASSERT_EQ(seen.size(), sent) << "send completions";
  for (const Completion& c : seen) {
    EXPECT_EQ(c.code, Code::kOk) << "send " << c.wr_id;
  }
  EXPECT_TRUE((*ep)->status().ok()) << (*ep)->status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpFullSocket, ::testing::ValuesIn(plain_cases("tcp")), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpFullSocket);

}  // namespace
}  // namespace gw::conformance
