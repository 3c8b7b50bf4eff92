// Authentication of dpdk connections (issue 24): the SYN / SYN-ACK handshake on the ring bus
// with every key combination; what each side says, and that nothing reaches the acceptor.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "auth_case.h"

namespace gw::dpdktest {
namespace {

// Polls `t` until `done()` or the deadline; returns its completions' count.
template <class F>
size_t drive(Transport& t, Deadline dl, F done) {
  Completion c[8];
  size_t n = 0;
  while (!done() && !dl.expired()) {
    auto got = t.cq().wait(c, Millis(1), Nanos(0));
    if (got.ok()) n += *got;
  }
  return n;
}

TEST(DpdkAuth, OnlyTheRightKeyConnectsAndBothSidesSayWhy) {
  int run = 0;
  for (const conformance::KeyCase& k : conformance::key_cases()) {
    SCOPED_TRACE(k.name);
    const std::string spec = "dpdk:ring=auth" + std::to_string(run++);
    const conformance::TransportCase c{"auth", "dpdk", spec.c_str()};
    auto a = conformance::open_with_key(c, k.a_key), b = conformance::open_with_key(c, k.b_key);
    ASSERT_TRUE(a && b);
    // An any-source receive on the acceptor: a refused peer must not complete it.
    std::vector<uint8_t> rbuf(64, 0), sbuf(64);
    for (size_t i = 0; i < sbuf.size(); ++i) sbuf[i] = static_cast<uint8_t>(i * 7 + 1);
    RecvRequest any{rbuf.data(), rbuf.size(), kAnyTag, 9, nullptr};
    ASSERT_EQ(b->post_recv_any({&any, 1}).value(), 1u);
    std::optional<Result<std::unique_ptr<Endpoint>>> ba;
    std::atomic<bool> accepted{false};
    std::thread acceptor([&] {
      ba.emplace(b->connect({a->address(), 41, false, 0, "rank 0"}, Deadline(Millis(5000))));
      accepted = true;
    });
    auto ab = a->connect({b->address(), 41, true, 1, "rank 1"}, Deadline(Millis(5000)));
    ASSERT_TRUE(ab.ok()) << ab.status().to_string();  // a dpdk dial returns at once
    SendRequest s{sbuf.data(), sbuf.size(), 5, 1, nullptr};
    ASSERT_EQ((*ab)->post_send({&s, 1}).value(), 1u);
    drive(*a, Deadline(Millis(5000)), [&] { return accepted.load(); });
    acceptor.join();
    if (k.right()) {
      ASSERT_TRUE(ba->ok()) << ba->status().to_string();
      Deadline dl(Millis(5000));
      while (rbuf != sbuf && !dl.expired()) {
        drive(*a, Deadline(Millis(1)), [] { return false; });
        drive(*b, Deadline(Millis(1)), [] { return false; });
      }
      EXPECT_EQ(rbuf, sbuf) << "not delivered bit-exact";
      continue;
    }
    ASSERT_FALSE(ba->ok()) << "the acceptor took the peer";
    drive(*a, Deadline(Millis(2000)), [&] { return !(*ab)->status().ok(); });
    conformance::expect_auth_refused((*ab)->status(), ba->status());
    EXPECT_EQ(drive(*b, Deadline(Millis(200)), [] { return false; }), 0u)
        << "the acceptor completed something for a refused peer";
    EXPECT_EQ(rbuf[0], 0) << "a refused peer's message was delivered";
  }
}

}  // namespace
}  // namespace gw::dpdktest
