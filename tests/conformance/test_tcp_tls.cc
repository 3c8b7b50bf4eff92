// tcp.tls=on (drivers/tcp/tcp_tls.h): what crosses the wire is ciphertext (a relay between
// the two transports records it; the same run without TLS shows the plaintext, so the check
// can fail), TLS needs the job's key, and ranks that disagree on tcp.tls are told so.
// The data path under TLS runs the whole conformance table (rows tcp_tls, tcp_tls_streams4).
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "auth_case.h"
#include "conformance.h"
#include "gw_auth.h"
#include "raw_peer.h"

namespace gw::conformance {
namespace {

const std::string kCanary = "gradwire-canary-";

TransportCase tls_case(const char* spec) { return {"tls", "tcp", spec, "tls test key"}; }

// Forwards one connection from `lfd` to `to` both ways until `stop`; records what goes to `to`.
void relay(int lfd, RawAddr to, std::atomic<bool>& stop, std::string& seen) {
  pollfd lp{lfd, POLLIN, 0};
  if (::poll(&lp, 1, 10000) != 1) return;
  RawFd a(::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  RawFd b = raw_dial(to);
  if (a.get() < 0 || b.get() < 0) return;
  char buf[65536];
  while (!stop) {
    pollfd p[2] = {{a.get(), POLLIN, 0}, {b.get(), POLLIN, 0}};
    if (::poll(p, 2, 10) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) return;  // one side closed: so does the relay
      if (i == 0) seen.append(buf, static_cast<size_t>(n));
      for (ssize_t off = 0; off < n;) {
        const ssize_t w =
            ::send(p[1 - i].fd, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN) return;
        off += w > 0 ? w : 0;
      }
    }
  }
}

// A sends 64 KiB of canary to B through the relay; returns what the relay saw going to B.
std::string through_relay(const char* spec) {
  auto a = open_case(tls_case(spec)), b = open_case(tls_case(spec));
  EXPECT_TRUE(a.ok() && b.ok()) << a.status().to_string() << " / " << b.status().to_string();
  if (!a.ok() || !b.ok()) return {};
  uint16_t port = 0;
  RawFd lfd = raw_listen(decode((*b)->address()), port);
  std::atomic<bool> stop{false};
  std::string seen;
  std::thread rt([&] { relay(lfd.get(), decode((*b)->address()), stop, seen); });
  Deadline dl(kStepTimeout);
  Result<std::unique_ptr<Endpoint>> eb = Status(Code::kUnavailable, "not run");
  std::thread bt([&] { eb = (*b)->connect({(*a)->address(), 5, false, 0, "A"}, dl); });
  auto ea = (*a)->connect({with_port((*b)->address(), port), 5, true, 1, "B via relay"}, dl);
  bt.join();
  EXPECT_TRUE(ea.ok() && eb.ok()) << ea.status().to_string() << " / " << eb.status().to_string();
  if (ea.ok() && eb.ok()) {
    std::string msg;
    while (msg.size() < 65536) msg += kCanary;
    std::string got(msg.size(), '\0');
    SendRequest s{msg.data(), msg.size(), 1, 1, nullptr};
    RecvRequest r{got.data(), got.size(), 1, 2, nullptr};
    auto pr = (*eb)->post_recv({&r, 1});
    auto ps = (*ea)->post_send({&s, 1});
    EXPECT_TRUE(pr.ok() && *pr == 1) << pr.status().to_string();
    EXPECT_TRUE(ps.ok() && *ps == 1) << ps.status().to_string();
    int done = 0;
    Completion c[4];
    while (done < 2 && !dl.expired()) {
      for (Transport* t : {a->get(), b->get()}) {
        auto n = t->cq().poll(c);
        for (size_t i = 0; n.ok() && i < *n; ++i) {
          EXPECT_EQ(c[i].code, Code::kOk) << "wr " << c[i].wr_id;
          ++done;
        }
      }
    }
    EXPECT_EQ(done, 2) << spec;
    EXPECT_TRUE(got == msg) << spec << ": the message arrived changed";
  }
  stop = true;
  rt.join();
  return seen;
}

TEST(TcpTls, WireCarriesCiphertextOnly) {
  const std::string plain = through_relay("tcp:iface=lo");
  const std::string tls = through_relay("tcp:iface=lo,tls=on");
  const std::string probe = "-canary-";
  // The control: without TLS the relay sees the message (so this test can see a leak).
  EXPECT_NE(plain.find(probe), std::string::npos) << "relay saw " << plain.size() << " bytes";
  EXPECT_GT(tls.size(), 65536u);  // the message went through it
  EXPECT_EQ(tls.find(probe), std::string::npos) << "plaintext on the wire with tcp.tls=on";
}

TEST(TcpTls, NeedsTheJobsKey) {
  ::unsetenv("GW_AUTH_KEY");
  auth::reload_key_for_test();
  auto t = Transport::open("tcp:iface=lo,tls=on");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find("GW_AUTH_KEY"), std::string_view::npos)
      << t.status().to_string();
}

// A dials with TLS, B listens without: B refuses naming the setting; A's endpoint fails
// (the refused streams close) instead of waiting.
TEST(TcpTls, RanksThatDisagreeAreToldSo) {
  auto a = open_case(tls_case("tcp:iface=lo,tls=on"));
  auto b = open_case(tls_case("tcp:iface=lo"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto [ea, eb] = connect_pair(**a, **b, 9, Deadline(kStepTimeout));
  ASSERT_FALSE(eb.ok());
  EXPECT_EQ(eb.status().code(), Code::kInvalidArgument) << eb.status().to_string();
  EXPECT_NE(eb.status().message().find("tcp.tls"), std::string_view::npos)
      << eb.status().to_string();
  if (ea.ok()) {
    uint8_t x[8];
    RecvRequest r{x, sizeof x, 1, 1, nullptr};
    (void)(*ea)->post_recv({&r, 1});
    Completion c[4];
    Deadline dl(std::chrono::seconds(5));
    while ((*ea)->status().ok() && !dl.expired()) (void)(*a)->cq().wait(c, Millis(10));
    EXPECT_FALSE((*ea)->status().ok()) << "A never learnt that B refused";
  }
}

// A dialler that passes the key's challenge and then never starts TLS is dropped within
// tcp.hello_timeout_ms; the accepting connect() says why instead of waiting out its deadline.
TEST(TcpTls, StalledHandshakeIsDroppedInBoundedTime) {
  auto b = open_case(tls_case("tcp:iface=lo,tls=on,hello_timeout_ms=300"));
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ::setenv("GW_AUTH_KEY", "tls test key", 1);
  auth::reload_key_for_test();
  auto key = auth::process_key();
  ::unsetenv("GW_AUTH_KEY");
  auth::reload_key_for_test();
  ASSERT_TRUE(key.ok());
  RawFd fd = raw_dial(decode((*b)->address()));
  ASSERT_GE(fd.get(), 0);
  auto h = drv::tcp::make_hello(8, 1, 0, drv::tcp::kHelloTls);
  Completion none[1];
  Status st =
      auth::client_handshake(fd.get(), *key, "tcp", &h, sizeof h, "B", Deadline(kStepTimeout), [&] {
        return (*b)->cq().poll({none, 0}).status();
      });
  ASSERT_TRUE(st.ok()) << st.to_string();
  // The raw peer's address is not a transport's: connect() only needs the key to match.
  const auto t0 = Clock::now();
  auto e = (*b)->connect({(*b)->address(), 8, false, 0, "stalled peer"}, Deadline(kStepTimeout));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kUnavailable) << e.status().to_string();
  EXPECT_NE(e.status().message().find("hello_timeout_ms"), std::string_view::npos)
      << e.status().to_string();
  EXPECT_LT(secs, 2.0) << e.status().to_string();
}

}  // namespace
}  // namespace gw::conformance
