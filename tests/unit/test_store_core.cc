// The store server's request handling without sockets (store::StoreCore, tcp_store_core.h):
// what fuzz_store_core drives, checked against the protocol of tcp_store_proto.h. The server
// over real sockets is tested in tests/bootstrap.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gw_auth.h"
#include "tcp_store_core.h"

namespace gw::store {
namespace {

using wire::Op;
using wire::Reply;

// Keeps what each client was sent, past its authentication answer.
class Core final : public StoreCore {
 public:
  Core() : StoreCore("test", nullptr) {}
  std::map<const Client*, std::string> sent;

  Client& join() {
    Client& c = add_client(Fd(), "peer");
    uint8_t ch[auth::kClientHello];
    auth::keyless_hello(ch);
    feed(c, {reinterpret_cast<const char*>(ch), sizeof ch});
    EXPECT_EQ(sent[&c].size(), auth::kServerHello);
    sent[&c].clear();
    return c;
  }
  void feed(Client& c, std::string_view bytes) {
    received(c, bytes);
    if (!c.closed) handle_frames(c);
  }
  // The status byte of each reply frame sent to c, in order; clears them.
  std::string statuses(const Client& c) {
    std::string out, &s = sent[&c];
    for (size_t off = 0; off + wire::kHeader < s.size();) {
      auto len = wire::get_le(s.data() + off + 4, 4);
      out.push_back(static_cast<char>('0' + s[off + wire::kHeader]));
      off += wire::kHeader + len;
    }
    s.clear();
    return out;
  }

 private:
  void flush(Client& c) override {
    sent[&c] += c.out.substr(c.out_off);
    c.out.clear();
    c.out_off = 0;
  }
  void send_last(Client&, const uint8_t*, size_t) override {}
};

std::string set(std::string_view k, std::string_view v) {
  return wire::Writer().u8(static_cast<uint8_t>(Op::kSet)).str(k).str(v).finish();
}
std::string get(std::string_view k, int64_t ms) {
  return wire::Writer().u8(static_cast<uint8_t>(Op::kGet)).str(k).i64(ms).finish();
}
std::string hello(uint32_t rank) {
  return wire::Writer().u8(static_cast<uint8_t>(Op::kHello)).u32(rank).finish();
}
const char kOk = '0' + static_cast<char>(Reply::kOk);
const char kTimeout = '0' + static_cast<char>(Reply::kTimeout);
const char kLeft = '0' + static_cast<char>(Reply::kLeft);

TEST(StoreCore, SetThenGet) {
  Core core;
  Client& a = core.join();
  core.feed(a, set("k", "v") + get("k", 0));
  EXPECT_EQ(core.statuses(a), std::string{kOk} + kOk);
}

TEST(StoreCore, SetOfAnotherClientWakesAParkedGet) {
  Core core;
  Client &a = core.join(), &b = core.join();
  core.feed(b, get("k", 60000));
  EXPECT_TRUE(b.waiting);
  core.feed(a, set("k", "v"));
  EXPECT_FALSE(b.waiting);
  EXPECT_EQ(core.statuses(b), std::string{kOk});
}

TEST(StoreCore, ParkedGetTimesOutAndTheNextRequestFollows) {
  Core core;
  Client& a = core.join();
  core.feed(a, get("k", 1000) + set("k", "v"));
  ASSERT_TRUE(a.waiting);
  core.expire(a.deadline - Millis(1));
  EXPECT_TRUE(a.waiting);
  core.expire(a.deadline);
  core.handle_frames(a);
  EXPECT_EQ(core.statuses(a), std::string{kTimeout} + kOk);
}

TEST(StoreCore, SessionWithoutGoodbyeFailsTheWaitsOfOthers) {
  Core core;
  Client &a = core.join(), &b = core.join();
  core.feed(b, get("gw/addr/2", 60000));
  core.feed(a, hello(2));
  EXPECT_EQ(core.statuses(a), std::string{kOk});
  core.hang_up(a);
  EXPECT_EQ(core.statuses(b), std::string{kLeft});
  core.sweep();
  EXPECT_EQ(core.clients().size(), 1u);
}

TEST(StoreCore, OversizedFrameOrBadMagicClosesOnlyThatClient) {
  Core core;
  Client &a = core.join(), &b = core.join();
  core.feed(a, std::string("GWS1\xff\xff\xff\xff", 8));
  EXPECT_TRUE(a.closed);
  core.feed(b, "XXXX" + set("k", "v"));
  EXPECT_TRUE(b.closed);
  Client& c = core.join();
  core.feed(c, set("k", "v"));
  EXPECT_EQ(core.statuses(c), std::string{kOk});
}

}  // namespace
}  // namespace gw::store
