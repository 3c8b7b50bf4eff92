// TCP store server and client: connecting early, servers going away, hostile input.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "gw_auth.h"
#include "gw_store.h"
#include "store_test_util.h"

namespace gw {
namespace {

using namespace std::chrono_literals;

using test::kLong;

std::shared_ptr<Store> connect_or_die(uint16_t port) {
  auto s = connect_tcp_store("127.0.0.1", port, kLong);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

/// A plain socket to the server, to send it bytes no client would.
class RawSocket {
 public:
  explicit RawSocket(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawSocket() { ::close(fd_); }
  bool connected() const { return connected_; }
  /// Passes the authentication as a client without a key (to a server without one) does.
  bool authenticate() {
    Status st = auth::client_handshake(fd_, nullptr, "store", "", 0, "the store", Deadline(5s));
    EXPECT_TRUE(st.ok()) << st.to_string();
    return st.ok();
  }
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  /// True when the server closed this connection (EOF or reset) within 20 s.
  bool closed_by_server() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20'000) != 1) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) <= 0;
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string header(uint32_t magic, uint32_t len) {
  std::string h(8, '\0');
  for (int i = 0; i < 4; ++i) {
    h[i] = static_cast<char>(magic >> (8 * i));
    h[4 + i] = static_cast<char>(len >> (8 * i));
  }
  return h;
}
constexpr uint32_t kMagic = 0x31535747;

TEST(TcpStore, ClientConnectingBeforeTheServerStartsRetries) {
  uint16_t port = test::free_port();
  ASSERT_NE(port, 0);
  Result<std::shared_ptr<Store>> client = Status(Code::kInternal, "not run");
  std::thread t([&] { client = connect_tcp_store("127.0.0.1", port, kLong); });
  std::this_thread::sleep_for(100ms);  // let it meet a refused connection first
  auto server = TcpStoreServer::start("127.0.0.1", port);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  t.join();
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE((*client)->set("k", "v").ok());
  EXPECT_EQ((*client)->get("k", kLong).value(), "v");
}

TEST(TcpStore, ConnectTimeoutNamesHostPortAndLastError) {
  uint16_t port = test::free_port();
  auto client = connect_tcp_store("127.0.0.1", port, 100ms);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kTimeout);
  auto m = std::string(client.status().message());
  EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
  EXPECT_NE(m.find("refused"), std::string::npos) << m;
}

TEST(TcpStore, ServerGoneGivesAnErrorNotAHang) {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = connect_or_die((*server)->port());
  ASSERT_TRUE(client->set("k", "v").ok());
  // One request parked on the server when it goes away ...
  Result<std::string> parked = Status(Code::kInternal, "not run");
  std::thread t([&] { parked = client->get("never-set", kLong); });
  std::this_thread::sleep_for(50ms);
  server->reset();
  t.join();
  ASSERT_FALSE(parked.ok());
  EXPECT_EQ(parked.status().code(), Code::kRemoteError) << parked.status().to_string();
  // ... and requests made afterwards.
  for (int i = 0; i < 3; ++i) {
    auto v = client->get("k", kLong);
    ASSERT_FALSE(v.ok());
    EXPECT_TRUE(v.status().code() == Code::kRemoteError || v.status().code() == Code::kSystemError)
        << v.status().to_string();
  }
}

TEST(TcpStore, HostileClientsAreDroppedAndOthersStillServed) {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  uint16_t port = (*server)->port();
  auto good = connect_or_die(port);
  ASSERT_TRUE(good->set("before", "1").ok());

  // Half a frame that never completes must not block anyone.
  RawSocket stalled(port);
  ASSERT_TRUE(stalled.connected() && stalled.authenticate());
  ASSERT_TRUE(stalled.send(header(kMagic, 1000)));

  std::vector<std::string> attacks = {
      "GET /index.html HTTP/1.1\r\n\r\n",          // not our protocol
      header(kMagic, 0xFFFFFFF0u),                 // absurd frame length
      header(kMagic, 1) + "\x63",                  // unknown op
      header(kMagic, 5) + "\x01\xff\xff\xff\xff",  // SET, key length past the frame
      header(kMagic, 9) + std::string("\x01\x00\x00\x00\x00\x04\x00\x00\x00", 9),  // no value
      header(kMagic, 0),                                                           // empty payload
  };
  for (size_t i = 0; i < attacks.size(); ++i) {
    RawSocket raw(port);
    ASSERT_TRUE(raw.connected());
    if (i > 0) {
      ASSERT_TRUE(raw.authenticate());  // the first skips it: refused at once
    }
    ASSERT_TRUE(raw.send(attacks[i]));
    EXPECT_TRUE(raw.closed_by_server()) << "attack " << i;
    ASSERT_TRUE(good->set("after" + std::to_string(i), "ok").ok()) << "attack " << i;
    EXPECT_EQ(good->get("after" + std::to_string(i), kLong).value(), "ok");
  }
  EXPECT_EQ(connect_or_die(port)->get("before", kLong).value(), "1");
}

// Authentication (gw_auth.h): the process key is read again for each side in turn.
Result<std::shared_ptr<Store>> connect_with_key(const char* key, uint16_t port) {
  key ? ::setenv("GW_AUTH_KEY", key, 1) : ::unsetenv("GW_AUTH_KEY");
  auth::reload_key_for_test();
  return connect_tcp_store("127.0.0.1", port, 5s);
}

TEST(TcpStore, OnlyClientsWithTheServersKeyAreServed) {
  for (const char* server_key : {"job-key", static_cast<const char*>(nullptr)}) {
    server_key ? ::setenv("GW_AUTH_KEY", server_key, 1) : ::unsetenv("GW_AUTH_KEY");
    auth::reload_key_for_test();
    auto server = TcpStoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    const uint16_t port = (*server)->port();
    std::vector<const char*> wrong = {"other-key"};
    if (server_key) wrong.push_back(nullptr);
    for (const char* key : wrong) {
      auto bad = connect_with_key(key, port);
      ASSERT_FALSE(bad.ok()) << (key ? key : "no key") << " was served";
      EXPECT_EQ(bad.status().code(), Code::kUnavailable) << bad.status().to_string();
      EXPECT_NE(bad.status().message().find("authentication with tcp store"), std::string::npos)
          << bad.status().to_string();
      EXPECT_NE(bad.status().message().find("GW_AUTH_KEY"), std::string::npos);
    }
    auto good = connect_with_key(server_key, port);
    ASSERT_TRUE(good.ok()) << good.status().to_string();
    ASSERT_TRUE((*good)->set("rank/0", "addr").ok());
    EXPECT_EQ((*good)->get("rank/0", kLong).value(), "addr");
    EXPECT_EQ((*good)->add("ranks", 1).value(), 1) << "a refused client registered";
  }
  ::unsetenv("GW_AUTH_KEY");
  auth::reload_key_for_test();
}

TEST(TcpStore, OneSetWakesManyWaitingClients) {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  constexpr int kWaiters = 8;
  std::vector<std::string> got(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i, c = connect_or_die((*server)->port())] {
      std::vector<std::string> keys = {"go", "w" + std::to_string(i)};
      EXPECT_TRUE(c->set(keys[1], "").ok());
      auto v = c->get("go", kLong);
      got[i] = v.ok() ? *v : v.status().to_string();
      EXPECT_TRUE(c->wait(keys, kLong).ok());
    });
  }
  auto main_client = connect_or_die((*server)->port());
  std::vector<std::string> all;
  for (int i = 0; i < kWaiters; ++i) all.push_back("w" + std::to_string(i));
  ASSERT_TRUE(main_client->wait(all, kLong).ok());
  ASSERT_TRUE(main_client->set("go", "now").ok());
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(got[i], "now") << "waiter " << i;
}

TEST(TcpStore, OneClientServesManyThreadsWhileOneWaits) {
  auto server = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto c = connect_or_die((*server)->port());
  // A get parked on the server must not hold up the set that satisfies it.
  Result<std::string> v = Status(Code::kInternal, "not run");
  std::thread t([&] { v = c->get("later", kLong); });
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(c->set("later", "done").ok());
  t.join();
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "done");
}

TEST(TcpStore, PortInUseIsAClearError) {
  auto first = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = TcpStoreServer::start("127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kSystemError);
  EXPECT_NE(second.status().message().find(std::to_string((*first)->port())),
            std::string_view::npos);
}

TEST(TcpStore, WildcardServerTakesIpv4AndIpv6Clients) {
  auto server = TcpStoreServer::start("", 0);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  auto v4 = connect_tcp_store("127.0.0.1", (*server)->port(), kLong);
  ASSERT_TRUE(v4.ok()) << v4.status().to_string();
  ASSERT_TRUE((*v4)->set("from", "v4").ok());
  auto v6 = connect_tcp_store("::1", (*server)->port(), 2s);
  if (!v6.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << v6.status().to_string();
  EXPECT_EQ((*v6)->get("from", kLong).value(), "v4");
}

}  // namespace
}  // namespace gw
