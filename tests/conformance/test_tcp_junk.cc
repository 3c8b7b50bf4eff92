// Junk from raw sockets at the TCP driver: on an established stream (bad magic, absurd length,
// truncated header, ...) and on the listening socket before any hello. The connection that
// carries the junk errors, nothing is allocated from a bogus length, the process survives and
// every other connection keeps working.
#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <random>
#include <thread>

#include "auth_case.h"
#include "conformance.h"
#include "gw_auth.h"
#include "raw_peer.h"

namespace gw::conformance {
namespace {

using drv::tcp::FrameHeader;
using drv::tcp::make_data_header;
using drv::tcp::make_hello;

constexpr Nanos kErrorBound = std::chrono::seconds(2);

size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  return 0;  // ASan's allocator does not report here; it aborts on absurd sizes instead
#else
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

// T (under test) dials a raw listener that plays its peer, and is connected to U normally.
struct Rig {
  std::unique_ptr<Transport> t, u;
  std::unique_ptr<Endpoint> raw_ep, tu, ut;
  RawFd lfd;
  std::vector<RawFd> raw;  // by stream index
};

void make_rig(const TransportCase& c, Rig& r) {
  auto t = open_case(c), u = open_case(c);
  ASSERT_TRUE(t.ok() && u.ok()) << t.status().to_string() << " / " << u.status().to_string();
  r.t = std::move(t).value();
  r.u = std::move(u).value();
  uint16_t port = 0;
  r.lfd = raw_listen(decode(r.t->address()), port);
  ASSERT_GE(r.lfd.get(), 0);
  Deadline dl(kStepTimeout);
  // An active connect waits for the peer's answer to its authentication: peers in threads.
  std::thread peer([&] { r.raw = accept_streams(r.lfd.get(), nullptr, kStepTimeout); });
  auto ep = r.t->connect({with_port(r.t->address(), port), 11, true, 1, "raw peer"}, dl);
  peer.join();
  ASSERT_TRUE(ep.ok()) << ep.status().to_string();
  r.raw_ep = std::move(ep).value();
  ASSERT_FALSE(r.raw.empty());
  auto [tu, ut] = connect_pair(*r.t, *r.u, 12, dl);
  ASSERT_TRUE(tu.ok()) << tu.status().to_string();
  ASSERT_TRUE(ut.ok()) << ut.status().to_string();
  r.tu = std::move(tu).value();
  r.ut = std::move(ut).value();
}

// One message each way between two transports driven by this one thread.
void expect_pair_works(Transport& a, Endpoint& ab, Transport& b, Endpoint& ba) {
  std::vector<uint8_t> sa(1000), sb(777), ra(777 + kGuard, kGuardByte),
      rb(1000 + kGuard, kGuardByte);
  fill_pattern(sa.data(), sa.size(), 1);
  fill_pattern(sb.data(), sb.size(), 2);
  RecvRequest rqa{ra.data(), 777, 4, 1, nullptr}, rqb{rb.data(), 1000, 3, 1, nullptr};
  SendRequest sqa{sa.data(), sa.size(), 3, 2, nullptr}, sqb{sb.data(), sb.size(), 4, 2, nullptr};
  ASSERT_EQ(ab.post_recv({&rqa, 1}).value(), 1u);
  ASSERT_EQ(ba.post_recv({&rqb, 1}).value(), 1u);
  ASSERT_EQ(ab.post_send({&sqa, 1}).value(), 1u);
  ASSERT_EQ(ba.post_send({&sqb, 1}).value(), 1u);
  int ok_a = 0, ok_b = 0;
  Deadline dl(kStepTimeout);
  std::array<Completion, 8> out;
  while ((ok_a < 2 || ok_b < 2) && !dl.expired()) {
    for (auto [t, ok] : {std::pair{&a, &ok_a}, std::pair{&b, &ok_b}}) {
      auto n = t->cq().wait(out, Millis(1), Nanos(0));
      for (size_t i = 0; n.ok() && i < *n; ++i) {
        if (out[i].op == Op::kEndpointError) continue;  // of the junk endpoint, seen before
        EXPECT_EQ(out[i].code, Code::kOk) << "healthy pair: " << code_name(out[i].code);
        ++*ok;
      }
    }
  }
  ASSERT_EQ(ok_a, 2) << "healthy pair stalled after the junk";
  ASSERT_EQ(ok_b, 2);
  EXPECT_EQ(check_pattern(ra.data(), 777, 2), "");
  EXPECT_EQ(check_pattern(rb.data(), 1000, 1), "");
}

struct JunkCase {
  const char* name;
  std::string (*bytes)(uint64_t max_msg);
  bool close_after;  ///< the raw peer closes right after the junk
  bool protocol;     ///< ProtocolError expected (else RemoteError or ProtocolError)
};

std::string with_payload(const FrameHeader& h, size_t n) {
  return frame_bytes(h) + std::string(n, '\x5a');
}

const JunkCase kJunk[] = {
    {"bad_magic",
     [](uint64_t) {
       FrameHeader h = make_data_header(5, 10, 0, 0, 10);
       h.magic = 0x0BADF00D;
       return with_payload(h, 10);
     },
     false, true},
    {"bad_version",
     [](uint64_t) {
       FrameHeader h = make_data_header(5, 10, 0, 0, 10);
       h.version = 99;
       return with_payload(h, 10);
     },
     false, true},
    {"unknown_type",
     [](uint64_t) {
       FrameHeader h = make_data_header(5, 10, 0, 0, 10);
       h.type = 77;
       return with_payload(h, 10);
     },
     false, true},
    {"absurd_length",
     [](uint64_t) {
       return with_payload(make_data_header(5, uint64_t{1} << 62, 0, 0, 4096), 4096);
     },
     false, true},
    {"length_all_ones",
     [](uint64_t) {
       return with_payload(make_data_header(5, ~uint64_t{0} - 1, 0, 0, 1 << 20), 4096);
     },
     false, true},
    {"length_beyond_max_message",
     [](uint64_t max) { return with_payload(make_data_header(5, max + 1, 0, 0, 16), 16); }, false,
     true},
    {"chunk_outside_message",
     [](uint64_t) { return with_payload(make_data_header(5, 100, 0, 90, 20), 20); }, false, true},
    {"empty_chunk_of_message",
     [](uint64_t) { return frame_bytes(make_data_header(5, 100, 0, 0, 0)); }, false, true},
    {"hello_on_data_stream", [](uint64_t) { return frame_bytes(make_hello(11, 1, 0)); }, false,
     true},
    {"truncated_header_then_close",
     [](uint64_t) { return frame_bytes(make_data_header(5, 10, 0, 0, 10)).substr(0, 20); }, true,
     false},
    {"truncated_payload_then_close",
     [](uint64_t) {
       return with_payload(make_data_header(5, 50, 0, 0, 50), 10);  // the receive matched
     },
     true, false},
};

template <class J>
std::string pair_name(const ::testing::TestParamInfo<std::tuple<TransportCase, J>>& p) {
  return std::string(std::get<0>(p.param).name) + "_" + std::get<1>(p.param).name;
}

void PrintTo(const JunkCase& j, std::ostream* os) { *os << j.name; }

class TcpJunk : public ::testing::TestWithParam<std::tuple<TransportCase, JunkCase>> {
 protected:
  void SetUp() override { skip_unless_available(std::get<0>(GetParam())); }
};

TEST_P(TcpJunk, OnlyThatConnectionErrors) {
  // Not a structured binding: clang 14 cannot capture one in the lambdas below.
  const TransportCase& tc = std::get<0>(GetParam());
  const JunkCase& junk = std::get<1>(GetParam());
  Rig r;
  make_rig(tc, r);
  if (HasFatalFailure()) return;
  std::vector<uint8_t> buf(64 + kGuard, kGuardByte);
  RecvRequest rr{buf.data(), 64, 5, 1, nullptr};
  ASSERT_EQ(r.raw_ep->post_recv({&rr, 1}).value(), 1u);

  const size_t heap_before = heap_in_use();
  const auto t0 = Clock::now();
  raw_write(r.raw[0].get(), junk.bytes(r.t->properties().max_message_size), *r.t, kErrorBound);
  if (junk.close_after) r.raw.clear();

  // The pending receive fails; the transport closes every stream of that peer.
  std::vector<Completion> seen;
  auto recv_failed = [&] {
    return std::any_of(seen.begin(), seen.end(), [](auto& c) { return c.wr_id == 1; });
  };
  for (auto& s : r.raw) {
    EXPECT_TRUE(wait_closed(s.get(), *r.t, seen, kErrorBound))
        << junk.name << ": the transport kept the junk connection open";
  }
  std::array<Completion, 8> out;
  while (!recv_failed() && Clock::now() - t0 < kErrorBound) {
    auto n = r.t->cq().wait(out, Millis(20));
    if (n.ok()) seen.insert(seen.end(), out.begin(), out.begin() + static_cast<ptrdiff_t>(*n));
  }
  auto ok_code = [&](Code c) {
    return junk.protocol ? c == Code::kProtocolError
                         : c == Code::kProtocolError || c == Code::kRemoteError;
  };
  ASSERT_TRUE(recv_failed()) << junk.name << ": the pending receive did not fail within 2 s";
  for (const Completion& c : seen) {
    EXPECT_EQ(c.peer_id, 1u) << junk.name << ": completion for another peer";
    EXPECT_TRUE(ok_code(c.code)) << junk.name << ": completion code " << code_name(c.code);
  }
  Status st = r.raw_ep->status();
  EXPECT_TRUE(ok_code(st.code())) << junk.name << ": endpoint status " << st.to_string();
  EXPECT_NE(st.message().find("raw peer"), std::string_view::npos)
      << "error does not name the peer: " << st.to_string();
  uint8_t b = 0;
  SendRequest sr{&b, 1, 1, 9, nullptr};
  auto sent = r.raw_ep->post_send({&sr, 1});
  EXPECT_TRUE(!sent.ok() && sent.status().code() == st.code())
      << "the error is not sticky: post_send gave " << sent.status().to_string();
  EXPECT_LT(heap_in_use() - std::min(heap_in_use(), heap_before), size_t{16} << 20)
      << junk.name << ": the heap grew after junk";
  if (junk.protocol) {
    EXPECT_GE(r.t->stats()["protocol_errors"], 1u);
  }
  EXPECT_TRUE(std::all_of(buf.begin() + 64, buf.end(), [](uint8_t x) { return x == kGuardByte; }))
      << "junk written past the receive buffer";
  expect_pair_works(*r.t, *r.tu, *r.u, *r.ut);
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpJunk,
                         ::testing::Combine(::testing::ValuesIn(plain_cases("tcp")),
                                            ::testing::ValuesIn(kJunk)),
                         pair_name<JunkCase>);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpJunk);

using TcpRaw = TransportTest;

// Positive control: frames built by this test are what the driver speaks, so the junk tests
// above break exactly one thing at a time.
TEST_P(TcpRaw, ValidFramesFromARawPeerWork) {
  Rig r;
  make_rig(GetParam(), r);
  if (HasFatalFailure()) return;
  std::vector<uint8_t> buf(64 + kGuard, kGuardByte);
  RecvRequest rr{buf.data(), 64, 5, 1, nullptr};
  ASSERT_EQ(r.raw_ep->post_recv({&rr, 1}).value(), 1u);
  std::string payload(10, '\0');
  fill_pattern(reinterpret_cast<uint8_t*>(payload.data()), payload.size(), 7);
  raw_write(r.raw[0].get(), frame_bytes(make_data_header(5, 10, 0, 0, 10)) + payload, *r.t,
            kErrorBound);
  std::array<Completion, 4> out;
  auto n = r.t->cq().wait(out, kStepTimeout);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(out[0].code, Code::kOk);
  EXPECT_EQ(out[0].len, 10u);
  EXPECT_EQ(check_pattern(buf.data(), 10, 7), "");

  // And what the driver sends is what tcp_wire.h says.
  SendRequest s{payload.data(), 10, 6, 2, nullptr};
  ASSERT_EQ(r.raw_ep->post_send({&s, 1}).value(), 1u);
  // With several streams the driver picks one; read the one that has data.
  int fd = -1;
  Deadline dl(kStepTimeout);
  while (fd < 0 && !dl.expired()) {
    std::vector<pollfd> p;
    for (auto& rs : r.raw) p.push_back({rs.get(), POLLIN, 0});
    ::poll(p.data(), p.size(), 10);
    for (auto& q : p) fd = fd < 0 && (q.revents & POLLIN) ? q.fd : fd;
    (void)r.t->cq().poll(out);
  }
  ASSERT_GE(fd, 0) << "the message never reached the raw peer";
  FrameHeader h{};
  std::vector<Completion> seen;
  ASSERT_TRUE(raw_read(fd, &h, sizeof h, *r.t, seen, kStepTimeout));
  EXPECT_EQ(h.magic, drv::tcp::kMagic);
  EXPECT_EQ(h.type, uint8_t(drv::tcp::FrameType::kData));
  EXPECT_EQ(h.tag, 6u);
  EXPECT_EQ(h.msg_len, 10u);
  EXPECT_EQ(h.chunk_len, 10u);
  EXPECT_EQ(h.seq, 0u);
  std::string got(10, '\0');
  ASSERT_TRUE(raw_read(fd, got.data(), 10, *r.t, seen, kStepTimeout));
  EXPECT_EQ(got, payload);
}

// A length the driver allows but cannot buffer: the stream is back-pressured, not allocated.
TEST_P(TcpRaw, HugeLegalLengthIsNotAllocated) {
  Rig r;
  make_rig(GetParam(), r);
  if (HasFatalFailure()) return;
  const uint64_t huge = std::min<uint64_t>(r.t->properties().max_message_size, uint64_t{1} << 36);
  const size_t heap_before = heap_in_use();
  raw_write(r.raw[0].get(), with_payload(make_data_header(5, huge, 0, 0, 1 << 20), 1 << 20), *r.t,
            kErrorBound);
  std::array<Completion, 4> out;
  auto n = r.t->cq().wait(out, Millis(200));
  EXPECT_EQ(n.status().code(), Code::kTimeout) << "completion from a half-sent message";
  EXPECT_LT(heap_in_use() - std::min(heap_in_use(), heap_before), size_t{80} << 20)
      << "a " << huge << "-byte claim grew the heap";
  r.raw.clear();
  expect_pair_works(*r.t, *r.tu, *r.u, *r.ut);
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpRaw, ::testing::ValuesIn(plain_cases("tcp")), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpRaw);

// Junk at the listening socket, before any hello.
struct ListenerJunk {
  const char* name;
  std::string (*bytes)();
  bool close_after;
  bool keep_silent;  ///< sends nothing: the transport must not wait on it
};

const ListenerJunk kListenerJunk[] = {
    {"garbage_1MiB",
     [] {
       std::string s(1 << 20, '\0');
       std::mt19937_64 rng(5);
       for (auto& ch : s) ch = static_cast<char>(rng());
       return s;
     },
     false, false},
    {"bad_magic_hello",
     [] {
       FrameHeader h = make_hello(21, 1, 0);
       h.magic = 0x12345678;
       return frame_bytes(h);
     },
     false, false},
    {"absurd_stream_count", [] { return frame_bytes(make_hello(21, 1u << 31, 0)); }, false, false},
    {"stream_index_out_of_range", [] { return frame_bytes(make_hello(21, 2, 5)); }, false, false},
    {"data_frame_first", [] { return with_payload(make_data_header(1, 8, 0, 0, 8), 8); }, false,
     false},
    // A peer of wire version 1 (48-byte header) sends its hello and its authentication hello
    // together: the 64 bytes read as a hello say version 1, refused before the hello timeout.
    {"version_1_peer",
     [] {
       FrameHeader h = make_hello(21, 1, 0);
       h.version = 1;
       uint8_t a[auth::kClientHello];
       auth::keyless_hello(a);
       return frame_bytes(h).substr(0, 48) + std::string(reinterpret_cast<char*>(a), sizeof a);
     },
     false, false},
    {"truncated_hello_then_close", [] { return frame_bytes(make_hello(21, 1, 0)).substr(0, 20); },
     true, false},
    {"silent_connection", [] { return std::string(); }, false, true},
};

void PrintTo(const ListenerJunk& j, std::ostream* os) { *os << j.name; }

class TcpListenerJunk : public ::testing::TestWithParam<std::tuple<TransportCase, ListenerJunk>> {
 protected:
  void SetUp() override { skip_unless_available(std::get<0>(GetParam())); }
};

TEST_P(TcpListenerJunk, IsRejectedAndRealPeersStillConnect) {
  const auto& [tc, junk] = GetParam();
  auto t = open_case(tc), u = open_case(tc);
  ASSERT_TRUE(t.ok() && u.ok());
  const size_t heap_before = heap_in_use();
  RawFd raw = raw_dial(decode((*t)->address()));
  ASSERT_GE(raw.get(), 0);
  raw_write(raw.get(), junk.bytes(), **t, kErrorBound);
  if (junk.close_after) raw.reset();
  std::vector<Completion> seen;
  if (!junk.close_after && !junk.keep_silent) {
    EXPECT_TRUE(wait_closed(raw.get(), **t, seen, kErrorBound))
        << junk.name << ": the transport kept the junk connection open";
    EXPECT_GE((*t)->stats()["rejected_conns"], 1u);
  }
  EXPECT_TRUE(seen.empty()) << "completions from a connection that never identified itself";
  EXPECT_LT(heap_in_use() - std::min(heap_in_use(), heap_before), size_t{16} << 20);

  // A real peer connects while the junk connection is closed or still open.
  Deadline dl(kStepTimeout);
  auto [tu, ut] = connect_pair(**t, **u, 21, dl);
  ASSERT_TRUE(ut.ok()) << ut.status().to_string();
  ASSERT_TRUE(tu.ok()) << junk.name << ": " << tu.status().to_string();
  expect_pair_works(**t, **tu, **u, **ut);
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpListenerJunk,
                         ::testing::Combine(::testing::ValuesIn(plain_cases("tcp")),
                                            ::testing::ValuesIn(kListenerJunk)),
                         pair_name<ListenerJunk>);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpListenerJunk);

// A scanner's flood at the listening socket (issue 24): every connection refused and counted,
// one log line for all of them (the summary comes at most every 10 s), and a real pair keeps
// exchanging meanwhile -- no stall in a log write, no pile-up of sockets.
void flood(const TransportCase& tc, const ListenerJunk& junk) {
  auto t = open_case(tc), u = open_case(tc);
  ASSERT_TRUE(t.ok() && u.ok());
  WarnCounter warns("tcp");
  Deadline dl(kStepTimeout);
  auto [tu, ut] = connect_pair(**t, **u, 21, dl);
  ASSERT_TRUE(ut.ok()) << ut.status().to_string();
  ASSERT_TRUE(tu.ok()) << tu.status().to_string();
  const std::string bytes = junk.bytes().substr(0, 4096);
  const RawAddr at = decode((*t)->address());
  constexpr int kConns = 1000, kBatch = 100;
  for (int i = 0; i < kConns; i += kBatch) {
    std::vector<RawFd> fds;
    for (int k = 0; k < kBatch; ++k) {
      fds.push_back(raw_dial(at));
      ASSERT_GE(fds.back().get(), 0) << "connection " << i + k << " was not accepted";
      (void)::send(fds.back().get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    expect_pair_works(**t, **tu, **u, **ut);  // progress (and refusals) between batches
  }
  Deadline until(kErrorBound);
  while ((*t)->stats()["rejected_conns"] < kConns && !until.expired()) (void)(*t)->cq().poll({});
  EXPECT_EQ((*t)->stats()["rejected_conns"], static_cast<uint64_t>(kConns)) << junk.name;
  auto w = warns.warnings();
  EXPECT_EQ(w.size(), 1u) << junk.name << ": one line for the first refusal, not one each";
  expect_pair_works(**t, **tu, **u, **ut);
}

class TcpListenerFlood : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override { skip_unless_available(GetParam()); }
};

TEST_P(TcpListenerFlood, IsCountedWithOneLogLineAndNoStall) {
  for (const ListenerJunk& junk : kListenerJunk)
    if (!junk.keep_silent && !junk.close_after) flood(GetParam(), junk);
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpListenerFlood, ::testing::ValuesIn(plain_cases("tcp")), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpListenerFlood);

// Authentication (issue 24): a pair whose transports were opened with these keys.
class TcpAuth : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override { skip_unless_available(GetParam()); }
};

TEST_P(TcpAuth, OnlyTheRightKeyConnectsAndBothSidesSayWhy) {
  for (const KeyCase& k : key_cases()) {
    SCOPED_TRACE(k.name);
    auto a = open_with_key(GetParam(), k.a_key), b = open_with_key(GetParam(), k.b_key);
    ASSERT_TRUE(a && b);
    auto [ab, ba] = connect_pair(*a, *b, 31, Deadline(kStepTimeout));
    if (k.right()) {
      ASSERT_TRUE(ab.ok() && ba.ok())
          << ab.status().to_string() << " / " << ba.status().to_string();
      expect_pair_works(*a, **ab, *b, **ba);
      continue;
    }
    ASSERT_FALSE(ab.ok()) << "the dialling side connected";
    ASSERT_FALSE(ba.ok()) << "the accepting side took the peer";
    expect_auth_refused(ab.status(), ba.status());
    EXPECT_EQ(b->stats()["rejected_conns"], 1u);
    std::array<Completion, 4> out;
    EXPECT_EQ(b->cq().poll(out).value(), 0u) << "something was delivered";
  }
}

INSTANTIATE_TEST_SUITE_P(Tr, TcpAuth, ::testing::ValuesIn(plain_cases("tcp")), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TcpAuth);

}  // namespace
}  // namespace gw::conformance
