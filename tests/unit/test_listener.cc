// core::HelloListener (gw_listener.h): hellos taken whole, junk refused and counted, one log
// line for a flood of refusals, silent connections dropped at the hello timeout.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
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

  explicit Bed(int timeout_ms) {
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
        [this](Fd fd, const uint8_t* b) { taken.emplace_back(std::move(fd), std::vector<uint8_t>(b, b + kHello)); });
    EXPECT_TRUE(st.ok()) << st.to_string();
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
  // In two pieces, and three bytes of the driver's data behind it.
  ASSERT_EQ(::send(c.get(), hello, 7, 0), 7);
  for (int i = 0; i < 20; ++i) b.l.service();
  EXPECT_TRUE(b.taken.empty()) << "taken before the hello was complete";
  ASSERT_EQ(::send(c.get(), hello + 7, sizeof hello - 7, 0), static_cast<ssize_t>(sizeof hello - 7));
  ASSERT_TRUE(b.until([&] { return !b.taken.empty(); }));
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

}  // namespace
}  // namespace gw::core
