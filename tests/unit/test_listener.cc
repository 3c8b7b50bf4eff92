// core::HelloListener (gw_listener.h): hellos taken whole, junk refused and counted, one log
// line for a flood of refusals, silent connections dropped at the hello timeout.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "gw_listener.h"

namespace gw::core {
namespace {

constexpr uint8_t kMagic[4] = {'G', 'W', 'T', 'E'};
constexpr size_t kHello = 16;

struct Bed {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  std::shared_ptr<spdlog::logger> log = std::make_shared<spdlog::logger>("listener-test", sink);
  HelloListener l;
  SockAddr at;
  std::vector<std::pair<Fd, std::vector<uint8_t>>> taken;

  explicit Bed(int timeout_ms, const char* key = nullptr) {
    if (key)
      ::setenv("GW_AUTH_KEY", key, 1);
    else
      ::unsetenv("GW_AUTH_KEY");
    auth::reload_key_for_test();
    log->set_level(spdlog::level::debug);
    auto* sin = reinterpret_cast<sockaddr_in*>(&at.ss);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    at.len = sizeof(sockaddr_in);
    Status st = l.open(
        "test", log, at, kHello, timeout_ms,
        [](const uint8_t* b) -> const char* {
          return std::memcmp(b, kMagic, 4) == 0 ? nullptr : "wrong magic";
        },
        [this](Fd fd, const uint8_t* b) {
          taken.emplace_back(std::move(fd), std::vector<uint8_t>(b, b + kHello));
        });
    EXPECT_TRUE(st.ok()) << st.to_string();
    ::unsetenv("GW_AUTH_KEY");
    auth::reload_key_for_test();
  }
  Fd dial() {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&at.ss), at.len), 0);
    return fd;
  }
  // Services until `done()` or 5 s.
  template <class F>
  bool until(F done) {
    for (int i = 0; i < 5000 && !done(); ++i) {
      l.service();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done();
  }
  size_t warnings() {
    size_t n = 0;
    for (auto& m : sink->last_formatted()) n += m.find("[warning]") != std::string::npos;
    return n;
  }
};

TEST(HelloListener, TakesTheHelloWholeAndLeavesWhatFollows) {
  Bed b(5000);
  Fd c = b.dial();
  uint8_t hello[kHello + 3] = {'G', 'W', 'T', 'E'};
  for (size_t i = 4; i < sizeof hello; ++i) hello[i] = static_cast<uint8_t>(i);
  // In two pieces, and three bytes of the driver's data behind the authentication.
  ASSERT_EQ(::send(c.get(), hello, 7, 0), 7);
  for (int i = 0; i < 20; ++i) b.l.service();
  EXPECT_TRUE(b.taken.empty()) << "taken before the hello was complete";
  std::thread client([&] {
    Status st = auth::client_handshake(c.get(), nullptr, "test", hello + 7, kHello - 7, "l",
                                       Deadline(Millis(5000)));
    EXPECT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(::send(c.get(), hello + kHello, 3, 0), 3);
  });
  ASSERT_TRUE(b.until([&] { return !b.taken.empty(); }));
  client.join();
  ASSERT_EQ(b.taken.size(), 1u);
  EXPECT_EQ(std::memcmp(b.taken[0].second.data(), hello, kHello), 0);
  uint8_t rest[8];
  ssize_t r = ::recv(b.taken[0].first.get(), rest, sizeof rest, 0);
  ASSERT_EQ(r, 3);
  EXPECT_EQ(rest[0], kHello);
  EXPECT_EQ(b.l.rejected(), 0u);
  EXPECT_FALSE(b.l.has_pending());
}

TEST(HelloListener, AFloodOfJunkIsRefusedWithOneLogLine) {
  Bed b(5000);
  constexpr int kJunk = 300;  // more than kMaxPending at once
  uint8_t junk[kHello];
  std::memset(junk, 0x5a, sizeof junk);
  for (int i = 0; i < kJunk; ++i) {
    Fd c = b.dial();
    ASSERT_EQ(::send(c.get(), junk, sizeof junk, 0), static_cast<ssize_t>(sizeof junk));
    if (i % 50 == 0) b.l.service();
  }
  ASSERT_TRUE(b.until([&] { return b.l.rejected() == kJunk; })) << b.l.rejected();
  EXPECT_TRUE(b.taken.empty());
  EXPECT_EQ(b.warnings(), 1u) << "one line for the first refusal, the rest summed up later";
  EXPECT_NE(b.sink->last_formatted().front().find("wrong magic"), std::string::npos);
  b.l.refuse("driver's own reason");
  EXPECT_EQ(b.l.rejected(), kJunk + 1u);
  EXPECT_TRUE(b.l.needs_tick()) << "the summary line is still owed";
}

TEST(HelloListener, SilentAndClosedConnectionsAreDropped) {
  Bed b(100);
  Fd silent = b.dial();
  {
    Fd gone = b.dial();  // closes before its hello
  }
  ASSERT_TRUE(b.until([&] { return b.l.rejected() == 2; })) << b.l.rejected();
  EXPECT_FALSE(b.l.has_pending());
  uint8_t x;
  EXPECT_EQ(::recv(silent.get(), &x, 1, 0), 0) << "the silent connection was not closed";
  EXPECT_TRUE(b.taken.empty());
}

// Authentication (gw_auth.h): the listener's key against the dialler's, every combination.
struct AuthCase {
  const char* server;
  const char* client;
  bool taken;
};

TEST(HelloListener, OnlyTheRightKeyIsTakenAndBothSidesSayWhy) {
  const AuthCase cases[] = {{"k1", "k1", true},
                            {nullptr, nullptr, true},
                            {"k1", "k2", false},
                            {"k1", nullptr, false},
                            {nullptr, "k1", false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.server ? c.server : "-") + " vs " + (c.client ? c.client : "-"));
    Bed b(2000, c.server);
    Fd fd = b.dial();
    auth::KeyPtr key = c.client ? std::make_shared<const std::string>(c.client) : nullptr;
    uint8_t hello[kHello] = {'G', 'W', 'T', 'E', 9};
    Status st;
    std::thread client([&] {
      st = auth::client_handshake(fd.get(), key, "test", hello, kHello, "the listener",
                                  Deadline(Millis(2000)));
    });
    ASSERT_TRUE(b.until([&] { return !b.taken.empty() || b.l.rejected() > 0; }));
    client.join();
    EXPECT_EQ(st.ok(), c.taken) << st.to_string();
    EXPECT_EQ(b.taken.size(), c.taken ? 1u : 0u) << "a refused peer was taken";
    EXPECT_EQ(b.l.rejected(), c.taken ? 0u : 1u);
    if (c.taken) continue;
    EXPECT_NE(st.message().find("authentication with the listener failed"), std::string::npos)
        << st.to_string();
    EXPECT_NE(st.message().find("GW_AUTH_KEY"), std::string::npos) << st.to_string();
    bool logged = false;
    for (auto& m : b.sink->last_formatted())
      logged |= m.find("authentication failed") != std::string::npos &&
                m.find("GW_AUTH_KEY") != std::string::npos;
    EXPECT_TRUE(logged) << "the listener's side does not say why";
  }
}

TEST(AuthKey, AKeyFileOthersMayReadIsRefused) {
  const std::string path = ::testing::TempDir() + "gw_auth_key_test";
  std::ofstream(path) << "secret\n";
  ::unsetenv("GW_AUTH_KEY");
  ::setenv("GW_AUTH_KEY_FILE", path.c_str(), 1);
  ::chmod(path.c_str(), 0644);
  auth::reload_key_for_test();
  auto k = auth::process_key();
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("chmod 600"), std::string::npos) << k.status().to_string();
  HelloListener l;  // and nothing listens with it
  SockAddr at;
  EXPECT_FALSE(l.open("test", spdlog::default_logger(), at, kHello, 100, nullptr, nullptr).ok());
  ::chmod(path.c_str(), 0600);
  auth::reload_key_for_test();
  k = auth::process_key();
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  EXPECT_EQ(**k, "secret");
  std::ofstream(path, std::ios::trunc).flush();
  auth::reload_key_for_test();
  EXPECT_FALSE(auth::process_key().ok()) << "an empty key file was taken";
  ::unsetenv("GW_AUTH_KEY_FILE");
  ::unlink(path.c_str());
  auth::reload_key_for_test();
}

}  // namespace
}  // namespace gw::core
