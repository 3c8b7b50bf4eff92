// Wire headers of the TCP driver and the Address blob.
#include <gtest/gtest.h>

#include "gw_socket.h"
#include "gw_transport.h"
#include "tcp_wire.h"

namespace gw::drv::tcp {
namespace {

constexpr uint64_t kMax = uint64_t{1} << 30;

TEST(TcpWire, ValidDataAndHello) {
  EXPECT_EQ(check_header(make_data_header(7, 100, 0, 0, 100), kMax), nullptr);
  EXPECT_EQ(check_header(make_data_header(7, 100, 0, 60, 40), kMax), nullptr);
  EXPECT_EQ(check_header(make_data_header(7, 0, 3, 0, 0), kMax), nullptr);
  EXPECT_EQ(check_header(make_hello(99, 4, 3), kMax), nullptr);
}

TEST(TcpWire, RejectsBadMagicVersionType) {
  auto h = make_data_header(7, 10, 0, 0, 10);
  h.magic ^= 1;
  EXPECT_NE(check_header(h, kMax), nullptr);
  h = make_data_header(7, 10, 0, 0, 10);
  h.version = kVersion + 1;
  EXPECT_NE(check_header(h, kMax), nullptr);
  h.version = kVersion;
  h.type = 77;
  EXPECT_NE(check_header(h, kMax), nullptr);
}

TEST(TcpWire, RejectsAbsurdAndInconsistentLengths) {
  EXPECT_NE(check_header(make_data_header(1, kMax + 1, 0, 0, 1), kMax), nullptr);
  EXPECT_NE(check_header(make_data_header(1, ~uint64_t{0}, 0, 0, 1), kMax), nullptr);
  EXPECT_NE(check_header(make_data_header(1, 100, 0, 90, 20), kMax), nullptr);  // past end
  EXPECT_NE(check_header(make_data_header(1, 100, 0, 101, 0), kMax), nullptr);
  EXPECT_NE(check_header(make_data_header(1, 100, 0, 0, 0), kMax), nullptr);  // empty chunk
  EXPECT_NE(check_header(make_data_header(1, 10, 0, ~uint64_t{0} - 2, 5), kMax), nullptr);
}

TEST(TcpWire, RejectsMalformedHello) {
  EXPECT_NE(check_header(make_hello(1, 0, 0), kMax), nullptr);
  EXPECT_NE(check_header(make_hello(1, 4, 4), kMax), nullptr);
  EXPECT_NE(check_header(make_hello(1, kMaxStreams + 1, 0), kMax), nullptr);
  auto h = make_hello(1, 2, 0);
  h.chunk_len = 5;
  EXPECT_NE(check_header(h, kMax), nullptr);
}

TEST(TcpAddr, RoundTripsV4AndV6) {
  for (const char* fam : {"inet", "inet6"}) {
    auto c = choose_local("lo", "", fam);
    if (!c.ok()) {
      ADD_FAILURE() << "loopback has no " << fam << " address: " << c.status().to_string();
      continue;
    }
    c->addr.set_port(4242);
    uint8_t buf[32];
    size_t n = encode_addr(c->addr, buf);
    auto back = decode_addr(buf, n);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->to_string(), c->addr.to_string());
    EXPECT_FALSE(decode_addr(buf, n - 1).ok());
  }
}

TEST(TcpAddr, UnknownInterfaceNamesWhatExists) {
  auto c = choose_local("nosuchif0", "", "auto");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(std::string(c.status().message()).find("lo"), std::string::npos);
  EXPECT_FALSE(choose_local("", "300.1.1.1/8", "auto").ok());
  EXPECT_FALSE(choose_local("", "", "ipx").ok());
  EXPECT_TRUE(choose_local("", "127.0.0.0/8", "auto").ok());
}

TEST(Address, BlobRules) {
  uint8_t p[119] = {};
  auto a = Address::make("tcp", 1, {p, 10});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->driver(), "tcp");
  EXPECT_EQ(a->version(), 1);
  EXPECT_EQ(a->payload().size(), 10u);
  auto b = Address::from_bytes(a->bytes());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->bytes(), a->bytes());
  EXPECT_TRUE(Address::make("tcp", 1, {p, 119}).ok());
  EXPECT_FALSE(Address::make("tcp", 1, {p, 120}).ok());
  EXPECT_FALSE(Address::make("toolongname", 1, {p, 1}).ok());
  EXPECT_FALSE(Address::from_bytes("short").ok());
  EXPECT_FALSE(Address::from_bytes(std::string(129, 'x')).ok());
}

TEST(Transport, UnknownDriverAndKeyAreRejected) {
  auto t = Transport::open("carrier-pigeon");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("tcp"), std::string::npos);
  auto k = Transport::open("tcp:iface=lo,strems=4");
  ASSERT_FALSE(k.ok());
  EXPECT_NE(std::string(k.status().message()).find("streams"), std::string::npos);
  EXPECT_FALSE(Transport::open("tcp:streams=0").ok());
  EXPECT_FALSE(Transport::open("auto:x=1").ok());
}

TEST(Transport, AutoPicksABuiltDriver) {
  auto t = Transport::open("auto");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_FALSE((*t)->properties().name.empty());
}

TEST(Transport, RegisterRejectsBadMemory) {
  auto t = Transport::open("tcp:iface=lo");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->register_memory(nullptr, 10, MemKind::kHost).status().code(),
            Code::kInvalidArgument);
  char space[32];
  char* buf = space + 8;  // the region; the bytes around it are outside
  EXPECT_EQ((*t)->register_memory(buf, 16, MemKind::kCudaDevice).status().code(),
            Code::kNotSupported);
  auto mr = (*t)->register_memory(buf, 16, MemKind::kHost);
  ASSERT_TRUE(mr.ok());
  EXPECT_TRUE(mr->contains(buf + 4, 12));
  EXPECT_FALSE(mr->contains(buf + 4, 13));
  EXPECT_FALSE(mr->contains(space + 7, 1));
}

}  // namespace
}  // namespace gw::drv::tcp
