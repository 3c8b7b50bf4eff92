// Suite 'rdma' (inside the soft-RoCE VM): malformed traffic on a connected queue pair. Rank 0
// bypasses its driver and posts raw work requests (bad version, type or lengths, a message
// longer than the posted buffer, a clear-to-send or a WRITE with immediate for a request that
// does not exist); rank 1's endpoint must fail with a clear error, count it, complete its
// pending receive with that error and leave its other buffers untouched. Also: striping over
// two queue pairs actually happens and keeps every byte in place.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <functional>

#include "conformance.h"
#include "rdma_endpoint.h"
#include "rdma_test_util.h"
#include "rdma_wire.h"

namespace gw::conformance {
namespace {

namespace rd = gw::drv::rdma;

// What rank 0 puts on the wire.
struct Raw {
  ibv_wr_opcode op = IBV_WR_SEND;
  std::vector<uint8_t> bytes;
  uint32_t imm = 0;
};

Raw header_only(const rd::MsgHdr& h, size_t extra = 0) {
  Raw r;
  r.bytes.resize(sizeof h + extra, 0x3c);
  std::memcpy(r.bytes.data(), &h, sizeof h);
  return r;
}

rd::MsgHdr eager_hdr(uint64_t len) {
  rd::MsgHdr h;
  h.type = static_cast<uint8_t>(rd::MsgType::kEager);
  h.tag = 7;
  h.len = len;
  return h;
}

struct Outcome {
  Code code = Code::kOk;
  std::string text;
  uint64_t protocol_errors = 0;
  bool recv_failed = false;
  bool buffer_untouched = true;
};

// Connects two ranks, posts a receive on rank 1, sends `raw` from rank 0's queue pair, and
// waits until rank 1's endpoint reports an error (or 20 s pass).
Outcome inject(const Raw& raw) {
  Outcome out;
  auto groups = make_groups(kRxe, 2);
  if (groups.size() != 2) return out;
  Group& g0 = *groups[0];
  Group& g1 = *groups[1];
  std::vector<uint8_t> rbuf(4096, 0xee);
  RecvRequest rr{rbuf.data(), 64, 7, 42, nullptr};  // small on purpose: guard bytes follow
  EXPECT_EQ(*g1.endpoint(0).post_recv({&rr, 1}), 1u);

  auto& ep0 = dynamic_cast<rd::RdmaEndpoint&>(g0.endpoint(1));
  auto& t0 = dynamic_cast<rd::RdmaTransport&>(g0.transport());
  std::vector<uint8_t> src = raw.bytes;
  if (src.empty()) src.resize(1);
  rd::MrPtr mr(ibv_reg_mr(t0.pd(), src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE));
  EXPECT_TRUE(mr != nullptr);
  if (!mr) return out;
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(raw.bytes.size()),
              mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 0;  // kind 0: the driver ignores its completion
  wr.sg_list = &sge;
  wr.num_sge = raw.bytes.empty() ? 0 : 1;
  wr.opcode = raw.op;
  wr.imm_data = htonl(raw.imm);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(ep0.qp(0), &wr, &bad), 0);

  auto end = Clock::now() + std::chrono::seconds(20);
  bool ep_error = false;
  while (Clock::now() < end && !ep_error) {
    Completion c[4];
    (void)g0.transport().cq().poll(c);
    auto n = g1.transport().cq().wait(c, Millis(100));
    if (!n.ok()) continue;
    for (size_t i = 0; i < *n; ++i) {
      if (c[i].op == Op::kEndpointError) ep_error = true;
      if (c[i].op == Op::kRecv && c[i].wr_id == 42) out.recv_failed = c[i].code != Code::kOk;
    }
  }
  EXPECT_TRUE(ep_error) << "rank 1 never reported the malformed traffic";
  Status st = g1.endpoint(0).status();
  out.code = st.code();
  out.text = st.to_string();
  out.protocol_errors = g1.transport().stats()["protocol_errors"];
  for (size_t i = 64; i < rbuf.size(); ++i) out.buffer_untouched &= rbuf[i] == 0xee;
  return out;
}

class RdmaWire : public ::testing::Test {
 protected:
  void SetUp() override { require_rxe(); }
  static void expect_protocol_error(const Outcome& o, const char* words) {
    EXPECT_EQ(o.code, Code::kProtocolError) << o.text;
    EXPECT_NE(o.text.find(words), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("rank 0"), std::string::npos) << "names the peer: " << o.text;
    EXPECT_EQ(o.protocol_errors, 1u);
    EXPECT_TRUE(o.recv_failed) << "the pending receive completes with the error";
    EXPECT_TRUE(o.buffer_untouched);
  }
};

TEST_F(RdmaWire, WrongVersion) {
  rd::MsgHdr h = eager_hdr(0);
  h.version = 99;
  expect_protocol_error(inject(header_only(h)), "unknown version");
}

TEST_F(RdmaWire, UnknownType) {
  rd::MsgHdr h = eager_hdr(0);
  h.type = 77;
  expect_protocol_error(inject(header_only(h)), "unknown message type");
}

TEST_F(RdmaWire, ShorterThanAHeader) {
  Raw r;
  r.bytes.assign(10, 1);
  expect_protocol_error(inject(r), "shorter than a header");
}

// The header claims 1 MiB, 10 bytes follow: nothing may be copied past what arrived.
TEST_F(RdmaWire, EagerLengthBeyondPayload) {
  expect_protocol_error(inject(header_only(eager_hdr(1 << 20), 10)), "eager length mismatch");
}

// More bytes than a posted receive buffer holds: the device refuses them (a local length or
// QP operation error on rank 1's receive); the endpoint fails naming the cause.
TEST_F(RdmaWire, LongerThanThePostedBuffer) {
  Outcome o = inject(header_only(eager_hdr(kEager + 4096), kEager + 4096));
  EXPECT_EQ(o.code, Code::kRemoteError) << o.text;
  EXPECT_NE(o.text.find("receive from rank 0"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("more than a receive buffer holds"), std::string::npos) << o.text;
  EXPECT_TRUE(o.recv_failed);
  EXPECT_TRUE(o.buffer_untouched);
}

// A compact eager message (SEND with immediate, no header) longer than rdma.eager_bytes: it
// fits the receive buffer (which also holds a header), so the device takes it; the driver
// refuses it.
TEST_F(RdmaWire, CompactEagerBeyondTheEagerLimit) {
  Raw r;
  r.op = IBV_WR_SEND_WITH_IMM;
  r.imm = 7;
  r.bytes.assign(kEager + 8, 0x3c);
  expect_protocol_error(inject(r), "more than rdma.eager_bytes");
}

TEST_F(RdmaWire, ClearToSendForUnknownSend) {
  rd::MsgHdr h;
  h.type = static_cast<uint8_t>(rd::MsgType::kCts);
  h.id = 999;
  h.len = 1 << 20;
  h.addr = 0x1000;
  h.rkey = 0x1234;
  h.stripes = 1;
  expect_protocol_error(inject(header_only(h)), "not waiting for one");
}

// A staging window (kWin) for a send that does not exist.
TEST_F(RdmaWire, WindowForUnknownSend) {
  rd::MsgHdr h;
  h.type = static_cast<uint8_t>(rd::MsgType::kWin);
  h.id = 999;
  h.len = 4096;
  h.addr = 0x1000;
  h.rkey = 0x1234;
  h.stripes = 1;
  expect_protocol_error(inject(header_only(h)), "window for a send that is not waiting");
}

// A zero-length WRITE with immediate naming a receive slot that waits for nothing.
TEST_F(RdmaWire, WriteWithImmediateForUnknownSlot) {
  Raw r;
  r.op = IBV_WR_RDMA_WRITE_WITH_IMM;
  r.imm = 12345;
  Outcome o = inject(r);
  EXPECT_EQ(o.code, Code::kProtocolError) << o.text;
  EXPECT_NE(o.text.find("receive slot 12345"), std::string::npos) << o.text;
  EXPECT_TRUE(o.recv_failed);
  EXPECT_TRUE(o.buffer_untouched);
}

// Two queue pairs: rendezvous messages of 2..4 stripes' worth are striped, eager ones are
// not; every byte lands and sends and receives complete exactly once, in posting order per tag.
TEST_F(RdmaWire, StripedOverTwoQueuePairs) {
  run_ranks(kRxeQps2, 2, [&](Group& g) {
    int peer = 1 - g.rank();
    auto& ep = dynamic_cast<rd::RdmaEndpoint&>(g.endpoint(peer));
    EXPECT_EQ(ep.lanes(), 2u);
    Exchange x(g);
    const size_t sizes[] = {kEager + 1, 16384 * 2 - 1, 16384 * 2, 65536 + 3, (1 << 20) + 5, 100};
    for (uint64_t k = 0; k < 30; ++k) {
      size_t len = sizes[k % 6];
      x.recv(peer, k % 2, len, k, len);
      x.send(peer, k % 2, len, k);
    }
    Status s = x.run();
    ASSERT_TRUE(s.ok()) << s.to_string();
    x.verify();
    EXPECT_TRUE(x.endpoint_errors().empty());
    auto st = g.transport().stats();
    EXPECT_EQ(st["striped_sends"], 15u) << "3 of 6 sizes stripe, 5 times each";
    EXPECT_EQ(st["rndv_sent"], 25u);
  });
}

// Receives posted ahead are advertised; same-sized sends write straight into them. A send of
// another size, and one already under way when the receive was posted, go the usual way
// (the advertisement is withdrawn or dropped); every byte lands where it belongs.
TEST_F(RdmaWire, AdvertisedReceivesTakeDirectWrites) {
  auto groups = make_groups(kRxe, 2);
  ASSERT_EQ(groups.size(), 2u);
  Group& g0 = *groups[0];
  Group& g1 = *groups[1];
  auto stat = [](Group& g, const char* k) { return g.transport().stats()[k]; };
  auto pump_until = [&](const std::function<bool()>& done) {
    auto end = Clock::now() + std::chrono::seconds(20);
    std::vector<Completion> got;
    while (!done() && Clock::now() < end) {
      Completion c[8];
      for (Group* g : {&g0, &g1}) {
        auto n = g->transport().cq().poll(c);
        for (size_t k = 0; n.ok() && k < *n; ++k) got.push_back(c[k]);
      }
    }
    for (auto& c : got) EXPECT_EQ(c.code, Code::kOk) << "wr_id " << c.wr_id;
    return got.size();
  };
  constexpr size_t kLen = 20000;
  std::vector<std::vector<uint8_t>> out(11, std::vector<uint8_t>(kLen)), in(11);
  for (size_t i = 0; i < 11; ++i) {
    fill_pattern(out[i].data(), kLen, msg_seed(0, 1, 3, i));
    in[i].assign(kLen + kGuard, kGuardByte);
  }
  auto post_recv = [&](size_t i, uint64_t tag, size_t cap) {
    RecvRequest r{in[i].data(), cap, tag, 100 + i, nullptr};
    ASSERT_EQ(*g1.endpoint(0).post_recv({&r, 1}), 1u);
  };
  auto post_send = [&](size_t i, uint64_t tag, size_t len) {
    SendRequest s{out[i].data(), len, tag, i, nullptr};
    ASSERT_EQ(*g0.endpoint(1).post_send({&s, 1}), 1u);
  };
  // 1. Eight receives first: all advertised, all eight sends written straight in.
  for (size_t i = 0; i < 8; ++i) post_recv(i, 3, kLen);
  pump_until([&] { return stat(g0, "adverts_received") == 8; });
  ASSERT_EQ(stat(g1, "adverts_sent"), 8u);
  for (size_t i = 0; i < 8; ++i) post_send(i, 3, kLen);
  pump_until([&] { return stat(g0, "msgs_sent") == 8 && stat(g1, "msgs_received") == 8; });
  EXPECT_EQ(stat(g0, "advert_writes"), 8u);
  EXPECT_EQ(stat(g1, "advert_writes_received"), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(check_pattern(in[i].data(), kLen, msg_seed(0, 1, 3, i)), "") << i;
    EXPECT_EQ(in[i][kLen], kGuardByte);
  }
  // 2. An advertised receive of 30000 bytes, a send of 20000: the usual rendezvous.
  post_recv(8, 4, kLen + kGuard / 2);
  pump_until([&] { return stat(g0, "adverts_received") == 9; });
  post_send(8, 4, kLen);
  pump_until([&] { return stat(g1, "msgs_received") == 9; });
  EXPECT_EQ(stat(g0, "advert_writes"), 8u);
  EXPECT_EQ(check_pattern(in[8].data(), kLen, msg_seed(0, 1, 3, 8)), "");
  // 3. A send under way before its receive is posted: the advertisement is dropped.
  post_send(9, 5, kLen);
  post_recv(9, 5, kLen);  // rank 1 has not polled: the request is not matched yet
  pump_until([&] { return stat(g1, "msgs_received") == 10; });
  EXPECT_EQ(stat(g0, "adverts_dropped"), 1u);
  EXPECT_EQ(stat(g0, "advert_writes"), 8u);
  EXPECT_EQ(check_pattern(in[9].data(), kLen, msg_seed(0, 1, 3, 9)), "");
  // 4. The tag works on: the next receive is advertised and written into again.
  post_recv(10, 5, kLen);
  pump_until([&] { return stat(g0, "adverts_received") == 11; });
  post_send(10, 5, kLen);
  pump_until([&] { return stat(g1, "msgs_received") == 11; });
  EXPECT_EQ(stat(g0, "advert_writes"), 9u);
  EXPECT_EQ(check_pattern(in[10].data(), kLen, msg_seed(0, 1, 3, 10)), "");
  EXPECT_TRUE(g0.endpoint(1).status().ok());
  EXPECT_TRUE(g1.endpoint(0).status().ok());
}

// After the hellos the control connection carries only heartbeats (rdma_liveness.cc): any other
// byte (a peer of another version, a stray writer) fails the endpoint with a protocol error
// that names the peer, and the pending receive completes with it.
TEST_F(RdmaWire, ForeignByteOnTheControlConnection) {
  auto groups = make_groups(kRxe, 2);
  ASSERT_EQ(groups.size(), 2u);
  Group& g1 = *groups[1];
  std::vector<uint8_t> rbuf(64);
  RecvRequest rr{rbuf.data(), 64, 7, 42, nullptr};
  ASSERT_EQ(*g1.endpoint(0).post_recv({&rr, 1}), 1u);
  auto& ep0 = dynamic_cast<rd::RdmaEndpoint&>(groups[0]->endpoint(1));
  const char junk = 'X';
  ASSERT_EQ(::send(ep0.ctrl_fd(), &junk, 1, MSG_NOSIGNAL), 1);
  bool ep_error = false, recv_failed = false;
  for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end && !ep_error;) {
    Completion c[4];
    auto n = g1.transport().cq().wait(c, Millis(100));
    for (size_t i = 0; n.ok() && i < *n; ++i) {
      if (c[i].op == Op::kEndpointError) ep_error = true;
      if (c[i].op == Op::kRecv && c[i].wr_id == 42) recv_failed = c[i].code != Code::kOk;
    }
  }
  ASSERT_TRUE(ep_error) << "rank 1 never reported the byte";
  const Status st = g1.endpoint(0).status();
  EXPECT_EQ(st.code(), Code::kProtocolError) << st.to_string();
  EXPECT_NE(st.to_string().find("byte 88 from rank 0"), std::string::npos) << st.to_string();
  EXPECT_NE(st.to_string().find("only heartbeats"), std::string::npos) << st.to_string();
  EXPECT_EQ(g1.transport().stats()["protocol_errors"], 1u);
  EXPECT_TRUE(recv_failed) << "the pending receive completes with the error";
}

}  // namespace
}  // namespace gw::conformance
