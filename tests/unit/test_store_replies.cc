// The TCP store client's reply parsing without sockets (store::Replies, tcp_store_replies.h):
// what fuzz_store_client_core drives, checked against the protocol of tcp_store_proto.h. The
// client over real sockets is tested in tests/bootstrap.
#include <gtest/gtest.h>

#include <string>

#include "tcp_store_proto.h"
#include "tcp_store_replies.h"

namespace gw::store {
namespace {

using wire::Reply;

const Replies kReplies("tcp store h:1");

// A reply payload: status, then the fields the test appends.
wire::Writer reply(Reply st) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(st));
  return w;
}
// The payload of a finished frame (what the client hands over after reading the header).
std::string payload(wire::Writer w) { return w.finish().substr(wire::kHeader); }

void expect_malformed(const Status& s, const char* op) {
  EXPECT_EQ(s.code(), Code::kProtocolError);
  EXPECT_EQ(s.message(), std::string("tcp store h:1: malformed reply to ") + op +
                             " (is that port a gradwire store server?)");
}

TEST(StoreReplies, HeaderGivesTheLengthOrRefusesMagicAndSize) {
  auto frame = reply(Reply::kOk).finish();
  auto len = kReplies.header("get", std::string_view(frame).substr(0, wire::kHeader));
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 1u);
  expect_malformed(kReplies.header("get", std::string_view("GWS2\x01\0\0\0", 8)).status(), "get");
  std::string big("GWS1\0\0\0\0", 8);
  wire::Writer::put_le(big.data() + 4, wire::kMaxFrame + 1, 4);
  expect_malformed(kReplies.header("set", big).status(), "set");
  wire::Writer::put_le(big.data() + 4, wire::kMaxFrame, 4);
  EXPECT_EQ(*kReplies.header("set", big), wire::kMaxFrame);
}

TEST(StoreReplies, OkIsABareOkOnly) {
  EXPECT_TRUE(kReplies.ok("set", payload(reply(Reply::kOk))).ok());
  expect_malformed(kReplies.ok("set", payload(reply(Reply::kOk).u8(0))), "set");
  expect_malformed(kReplies.ok("hello", payload(reply(Reply::kError))), "hello");
  expect_malformed(kReplies.ok("hello", ""), "hello");
}

TEST(StoreReplies, GetValueTimeoutOrLeft) {
  EXPECT_EQ(*kReplies.get("k", Millis(5), payload(reply(Reply::kOk).str("v"))), "v");
  auto t = kReplies.get("k", Millis(5), payload(reply(Reply::kTimeout)));
  EXPECT_EQ(t.status().code(), Code::kTimeout);
  EXPECT_NE(t.status().message().find("waited 5 ms, still missing 1 key: 'k'"), std::string::npos);
  auto left = kReplies.get("k", Millis(5), payload(reply(Reply::kLeft).u32(3).u32(1).str("k")));
  EXPECT_EQ(left.status().code(), Code::kRemoteError);
  EXPECT_EQ(left.status().rank(), 3);
  // Two missing keys for one GET, trailing bytes, a rank past the limit: not the protocol's.
  expect_malformed(
      kReplies.get("k", Millis(5), payload(reply(Reply::kLeft).u32(3).u32(2).str("k"))).status(),
      "get");
  expect_malformed(kReplies.get("k", Millis(5), payload(reply(Reply::kOk).str("v").u8(0))).status(),
                   "get");
  // A LEFT with a rank past the limit is named as the GET's (it said "wait" before).
  auto big = reply(Reply::kLeft).u32(wire::kMaxRank + 1).u32(1).str("k");
  expect_malformed(kReplies.get("k", Millis(5), payload(std::move(big))).status(), "get");
}

TEST(StoreReplies, GetStringLongerThanThePayloadIsMalformed) {
  auto w = reply(Reply::kOk).u32(1000);
  expect_malformed(kReplies.get("k", Millis(0), payload(std::move(w))).status(), "get");
}

TEST(StoreReplies, AddValueOrServersError) {
  EXPECT_EQ(*kReplies.add(payload(reply(Reply::kOk).i64(-7))), -7);
  auto e = kReplies.add(payload(reply(Reply::kError).str("not a counter")));
  EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(e.status().message(), "not a counter");
  expect_malformed(kReplies.add(payload(reply(Reply::kOk).u32(1))).status(), "add");
  expect_malformed(kReplies.add(payload(reply(Reply::kTimeout).i64(1))).status(), "add");
}

TEST(StoreReplies, WaitOkTimeoutOrLeftNamingTheMissingKeys) {
  EXPECT_TRUE(kReplies.wait(2, Millis(5), payload(reply(Reply::kOk))).ok());
  auto t = kReplies.wait(2, Millis(5), payload(reply(Reply::kTimeout).u32(2).str("a").str("b")));
  EXPECT_EQ(t.code(), Code::kTimeout);
  EXPECT_NE(t.message().find("still missing 2 keys: 'a', 'b'"), std::string::npos);
  auto left = kReplies.wait(2, Millis(5), payload(reply(Reply::kLeft).u32(2).u32(1).str("a")));
  EXPECT_EQ(left.code(), Code::kRemoteError);
  EXPECT_EQ(left.rank(), 2);
  EXPECT_NE(left.message().find("rank 2 left the job"), std::string::npos);
  // A count far past the keys sent stops at the end of the payload, without allocating it.
  expect_malformed(kReplies.wait(2, Millis(5), payload(reply(Reply::kTimeout).u32(~0u))), "wait");
  // More missing keys than were asked for, even well-formed ones (a million empty names would
  // be a million strings), is malformed.
  wire::Writer many = reply(Reply::kTimeout).u32(3);
  for (int i = 0; i < 3; ++i) many.str("");
  expect_malformed(kReplies.wait(2, Millis(5), payload(many)), "wait");
  expect_malformed(kReplies.wait(2, Millis(5), payload(reply(Reply::kError))), "wait");
}

TEST(StoreReplies, CheckAllPresentOrNot) {
  EXPECT_TRUE(*kReplies.check(payload(reply(Reply::kOk).u8(1))));
  EXPECT_FALSE(*kReplies.check(payload(reply(Reply::kOk).u8(0))));
  expect_malformed(kReplies.check(payload(reply(Reply::kOk))).status(), "check");
  expect_malformed(kReplies.check(payload(reply(Reply::kTimeout).u8(1))).status(), "check");
}

}  // namespace
}  // namespace gw::store
