// Bad input and failures: unknown keys and size mismatches (at the worker, and answered by the
// server for requests that reach it), key tables that differ, and ranks that die.
#include <atomic>

#include "ps_harness.h"
#include "ps_impl.h"

namespace gw::ps_test {
namespace {

bool has(const Status& st, const std::string& s) {
  return st.to_string().find(s) != std::string::npos;
}

TEST(PsErrors, UnknownKeyAndSizeMismatchAtTheWorker) {
  std::vector<KeySpec> keys{{7, 40}, {8, 10}};
  run_ranks(2, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(1, Consistency::kAsp);
    if (rank == 0) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok());
      ASSERT_TRUE((*s)->serve(kTimeout).ok());
      EXPECT_EQ((*s)->stats().pushes, 0u);
      return;
    }
    auto w = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(w.ok());
    std::vector<float> buf(41);
    auto a = (*w)->push(99, std::span<const float>(buf).first(40));
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(has(a.status(), "unknown key 99")) << a.status().to_string();
    auto b = (*w)->push(7, buf);
    ASSERT_FALSE(b.ok());
    EXPECT_TRUE(has(b.status(), "key 7 with 41 elements (164 bytes)")) << b.status().to_string();
    EXPECT_TRUE(has(b.status(), "40 float32 elements (160 bytes)")) << b.status().to_string();
    auto c = (*w)->pull(8, std::span<float>(buf).first(9));
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(has(c.status(), "pull of key 8 with 9 elements")) << c.status().to_string();
    EXPECT_EQ((*w)->clock(7), 0);
    EXPECT_EQ((*w)->wait(PsHandle{3, 77}, Millis(10)).code(), Code::kInvalidArgument);
    ASSERT_TRUE((*w)->finish(kTimeout).ok());
  });
}

void expect_table_rejected(std::vector<KeySpec> server_keys, std::vector<KeySpec> bad_keys,
                           PsOptions bad_opts, const std::vector<std::string>& words) {
  run_ranks(3, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(1, Consistency::kBsp);
    Status st;
    if (rank == 0) {
      st = PsServer::create(*g, server_keys, o, make_sum_updater()).status();
    } else if (rank == 1) {
      st = PsWorker::create(*g, server_keys, o).status();  // a good worker: told why
    } else {
      st = PsWorker::create(*g, bad_keys, bad_opts).status();
    }
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << "rank " << rank << ": " << st.to_string();
    for (const auto& w : words)
      EXPECT_TRUE(has(st, w)) << "rank " << rank << ": " << st.to_string();
    // run_ranks keeps every group until all ranks have their answer.
  });
}

TEST(PsErrors, ServerRejectsADifferentKeyTable) {
  std::vector<KeySpec> keys{{1, 100}, {2, 5}};
  expect_table_rejected(keys, {{1, 128}, {2, 5}}, options(1, Consistency::kBsp),
                        {"worker rank 2",
                         "key 1 has 128 elements (512 bytes) on the worker but "
                         "100 (400 bytes) on the server"});
  expect_table_rejected(keys, {{1, 100}, {2, 5}, {3, 4}}, options(1, Consistency::kBsp),
                        {"worker rank 2", "key 3"});
  expect_table_rejected(keys, {{1, 100}}, options(1, Consistency::kBsp),
                        {"key 2 (5 elements) is missing on the worker"});
  expect_table_rejected(keys, keys, options(1, Consistency::kSsp, 3), {"options differ", "ssp"});
  auto fail_fast = options(1, Consistency::kBsp);
  fail_fast.on_loss = PsOnLoss::kFail;
  expect_table_rejected(keys, keys, fail_fast, {"options differ", "on_loss fail"});
}

// A hand-made worker (no PsWorker) sends requests a real worker never would; the server
// answers each with an error naming key and sizes, and keeps serving.
class Rogue {
 public:
  explicit Rogue(Group& g) : g_(g) {}
  void send(const void* buf, size_t len, uint64_t tag) {
    SendRequest r{buf, len, tag, 1, nullptr};
    ASSERT_EQ(g_.endpoint(0).post_send({&r, 1}).value(), 1u);
    drive(1);
  }
  // Receive one message with `tag` from the server; returns its length.
  size_t recv(void* buf, size_t cap, uint64_t tag) {
    RecvRequest r{buf, cap, tag, 2, nullptr};
    EXPECT_EQ(g_.endpoint(0).post_recv({&r, 1}).value(), 1u);
    return drive(2);
  }
  ps::CtrlMsg ctrl() {
    ps::CtrlMsg m;
    EXPECT_EQ(recv(&m, sizeof m, ps::tag(ps::TagKind::kCtrl)), sizeof m);
    return m;
  }

 private:
  size_t drive(uint64_t wr_id) {
    Completion c[8];
    Deadline dl(kTimeout);
    while (!dl.expired()) {
      auto n = g_.transport().cq().wait(c, dl.remaining());
      if (!n.ok()) break;
      for (size_t i = 0; i < *n; ++i) {
        EXPECT_EQ(c[i].code, Code::kOk);
        if (c[i].wr_id == wr_id) return c[i].len;
      }
    }
    ADD_FAILURE() << "rogue: no completion";
    return 0;
  }
  Group& g_;
};

TEST(PsErrors, ServerAnswersBadRequestsAndKeepsServing) {
  std::vector<KeySpec> keys{{7, 40}, {8, 10}};  // one server, min part 16: part 0 = key 7
  auto init = [](uint64_t key, uint64_t off, std::span<float> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(key * 100 + off + i);
  };
  run_ranks(2, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(1, Consistency::kAsp);
    if (rank == 0) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater(), init);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      Status st = (*s)->serve(kTimeout);
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ((*s)->stats().bad_requests, 3u);
      return;
    }
    Rogue r(*g);
    // A correct key table first.
    std::vector<uint8_t> table(sizeof(ps::TableHeader) + keys.size() * sizeof(KeySpec));
    ps::TableHeader h;
    h.mode = static_cast<uint8_t>(Consistency::kAsp);
    h.servers = 1;
    h.min_part = 16;
    h.nkeys = keys.size();
    std::memcpy(table.data(), &h, sizeof h);
    std::memcpy(table.data() + sizeof h, keys.data(), keys.size() * sizeof(KeySpec));
    r.send(table.data(), table.size(), ps::tag(ps::TagKind::kTable));
    ASSERT_EQ(r.ctrl().type, static_cast<uint8_t>(ps::MsgType::kHelloOk));

    float data[64];
    auto pull = [&](uint32_t part, uint64_t bytes) {
      ps::CtrlMsg m;
      m.type = static_cast<uint8_t>(ps::MsgType::kPull);
      m.part = part;
      m.slot = 5;
      m.gen = 1;
      m.bytes = bytes;
      r.send(&m, sizeof m, ps::tag(ps::TagKind::kCtrl));
    };
    // 1. Wrong size.
    pull(0, 999);
    ps::CtrlMsg e = r.ctrl();
    EXPECT_EQ(e.type, static_cast<uint8_t>(ps::MsgType::kError));
    EXPECT_EQ(e.slot, 5u);
    std::string text(e.text_view());
    EXPECT_NE(text.find("key 7 elements [0, 40)"), std::string::npos) << text;
    EXPECT_NE(text.find("asks for 999 bytes; the part has 160 (40 float32)"), std::string::npos)
        << text;
    EXPECT_EQ(r.recv(data, sizeof data, ps::pull_tag(0, 5, 1)), 0u) << "empty reply";
    // 2. A part that does not exist.
    pull(4242, 4);
    text = std::string(r.ctrl().text_view());
    EXPECT_NE(text.find("part 4242"), std::string::npos) << text;
    EXPECT_NE(text.find("does not exist (the layout has 2 parts)"), std::string::npos) << text;
    EXPECT_EQ(r.recv(data, sizeof data, ps::pull_tag(4242, 5, 1)), 0u);
    // 3. A push of the wrong size.
    r.send(data, 3, ps::push_tag(1));
    text = std::string(r.ctrl().text_view());
    EXPECT_NE(text.find("push of key 8 elements [0, 10)"), std::string::npos) << text;
    EXPECT_NE(text.find("has 3 bytes; the server expects 40 (10 float32)"), std::string::npos)
        << text;
    // 4. The server still serves a correct pull.
    pull(0, 160);
    ASSERT_EQ(r.recv(data, sizeof data, ps::pull_tag(0, 5, 1)), 160u);
    for (int i = 0; i < 40; ++i) ASSERT_EQ(data[i], 700.0f + static_cast<float>(i));
    ps::CtrlMsg bye;
    bye.type = static_cast<uint8_t>(ps::MsgType::kBye);
    bye.bytes = 1;  // one push (the bad one) was sent
    r.send(&bye, sizeof bye, ps::tag(ps::TagKind::kCtrl));
    // Wait for the server's BYE so our exit is not taken for a failure.
    EXPECT_EQ(r.ctrl().type, static_cast<uint8_t>(ps::MsgType::kBye));
  });
}

// How a rank dies. kClose: its transport is destroyed, so its connections close (a process
// that exits or is killed, on TCP, where the kernel closes the sockets). kFreeze: it stops
// polling and never says anything again (a killed process on a polling transport such as DPDK,
// where nothing closes the connection and peers must time it out: dpdk.peer_timeout_ms).
enum class Death { kClose, kFreeze };

class PsDeath : public ::testing::TestWithParam<Death> {
 protected:
  void SetUp() override {
    if (GetParam() == Death::kFreeze && !transport_spec().starts_with("dpdk")) {
      GTEST_SKIP() << "a rank that stops polling is still answered by the kernel or NIC on "
                   << transport_spec() << ", so it is alive to its peers; only polling "
                   << "transports (dpdk) can see it die";
    }
    const char* mode = std::getenv("GW_TRANSPORT_PROGRESS");
    if (GetParam() == Death::kFreeze && !(mode && std::string(mode) == "caller")) {
      GTEST_SKIP() << "a frozen application's progress thread keeps its rank alive to its "
                   << "peers (transport.progress=thread); ps-dpdk-freeze runs this with "
                   << "caller, and ps-stop stops a whole process";
    }
  }
  // The dying rank: frozen ranks stay silent until `others_done`, then go.
  static void die(std::unique_ptr<Group>& g, const std::function<void()>& drop_role,
                  const std::atomic<bool>& others_done) {
    if (GetParam() == Death::kFreeze) idle_until(nullptr, [&] { return others_done.load(); });
    drop_role();
    g.reset();  // dies without finish()
  }
};

TEST_P(PsDeath, WorkerDeathIsReportedToEveryone) {
  std::vector<KeySpec> keys{{1, 64}};
  std::atomic<bool> pulling{false}, server_done{false}, all_done{false};
  std::atomic<int> done{0};
  run_ranks(3, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(1, Consistency::kBsp);
    o.on_loss = PsOnLoss::kFail;  // ps_loss_probe tests "continue"
    if (rank == 0) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok());
      Status st = (*s)->serve(kTimeout);
      EXPECT_EQ(st.code(), Code::kRemoteError) << st.to_string();
      EXPECT_TRUE(has(st, "worker rank 2 failed")) << st.to_string();
      server_done = true;
      all_done = ++done == 2;
      return;
    }
    auto w = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(w.ok());
    if (rank == 2) {
      ASSERT_TRUE(idle_until(g.get(), [&] { return pulling.load(); }));
      idle_until(
          g.get(), [] { return false; }, Millis(20));
      die(
          g, [&] { w->reset(); }, all_done);
      return;
    }
    std::vector<float> v(64, 1.0f);
    auto p = (*w)->push(1, v);
    ASSERT_TRUE(p.ok() && (*w)->wait(*p, kTimeout).ok());
    auto h = (*w)->pull(1, v);  // round 0 never completes
    ASSERT_TRUE(h.ok());
    pulling = true;
    Status st = (*w)->wait(*h, kTimeout);
    EXPECT_EQ(st.code(), Code::kRemoteError) << st.to_string();
    EXPECT_TRUE(has(st, "worker rank 2 failed")) << st.to_string();
    EXPECT_EQ((*w)->status().code(), Code::kRemoteError);
    EXPECT_EQ((*w)->push(1, v).status().code(), Code::kRemoteError) << "sticky";
    // Stay until the server has seen rank 2 go (our own exit would be a second failure).
    idle_until(g.get(), [&] { return server_done.load(); });
    all_done = ++done == 2;
  });
}

TEST_P(PsDeath, ServerDeathIsReportedToEveryone) {
  std::vector<KeySpec> keys{{1, 64}};  // min part 16 elements: cut over both servers
  std::atomic<bool> pulling{false}, all_done{false};
  std::atomic<int> done{0};
  run_ranks(3, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(2, Consistency::kAsp);
    o.on_loss = PsOnLoss::kFail;
    if (rank < 2) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok());
      if (rank == 1) {
        ASSERT_TRUE(idle_until(g.get(), [&] { return pulling.load(); }));
        die(
            g, [&] { s->reset(); }, all_done);
        return;
      }
      Status st = (*s)->serve(kTimeout);
      EXPECT_EQ(st.code(), Code::kRemoteError) << st.to_string();
      EXPECT_TRUE(has(st, "server rank 1 failed")) << st.to_string();
      all_done = ++done == 2;
      return;
    }
    auto w = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(w.ok());
    ASSERT_EQ((*w)->layout().num_parts(0), 2u);
    std::vector<float> v(64);
    auto h = (*w)->pull(1, v);
    ASSERT_TRUE(h.ok());
    pulling = true;
    Status st = (*w)->wait(*h, kTimeout);
    EXPECT_EQ(st.code(), Code::kRemoteError) << st.to_string();
    EXPECT_TRUE(has(st, "server rank 1 failed")) << st.to_string();
    all_done = ++done == 2;
  });
}

// ps.on_loss continue (processes and SIGKILL: ps-loss): the server drops a dead worker, BSP
// rounds go on with the others and nobody else fails.
TEST_P(PsDeath, WorkerLossIsSurvived) {
  GW_PS_NEED_RANKS(4);
  std::vector<KeySpec> keys{{1, 64}};
  std::atomic<bool> pushed{false}, all_done{false};
  std::atomic<int> done{0};
  run_ranks(4, [&](int rank, std::unique_ptr<Group>& g) {
    auto o = options(1, Consistency::kBsp);
    o.on_loss = PsOnLoss::kContinue;
    if (rank == 0) {
      auto s = PsServer::create(*g, keys, o, make_sum_updater());
      ASSERT_TRUE(s.ok());
      Status st = (*s)->serve(kTimeout);
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ((*s)->live_workers(), 2);
      EXPECT_EQ((*s)->stats().lost_workers, 1u);
      all_done = ++done == 3;
      return;
    }
    auto w = PsWorker::create(*g, keys, o);
    ASSERT_TRUE(w.ok());
    std::vector<float> v(64, static_cast<float>(rank));
    auto round = [&] {
      auto p = (*w)->push(1, v);
      ASSERT_TRUE(p.ok() && (*w)->wait(*p, kTimeout).ok());
      auto h = (*w)->pull(1, v);
      ASSERT_TRUE(h.ok());
      Status st = (*w)->wait(*h, kTimeout);
      ASSERT_TRUE(st.ok()) << "rank " << rank << ": " << st.to_string();
    };
    round();  // 1 + 2 + 3
    for (float x : v) ASSERT_EQ(x, 6.0f);
    if (rank == 3) {  // dies before pushing round 1
      die(
          g, [&] { w->reset(); }, all_done);
      return;
    }
    std::fill(v.begin(), v.end(), static_cast<float>(rank));
    round();  // 1 + 2
    for (float x : v) ASSERT_EQ(x, 3.0f);
    Status st = (*w)->finish(kTimeout);
    EXPECT_TRUE(st.ok()) << st.to_string();
    all_done = ++done == 3;
  });
}

INSTANTIATE_TEST_SUITE_P(How, PsDeath, ::testing::Values(Death::kClose, Death::kFreeze),
                         [](const auto& tp) {
                           return tp.param == Death::kClose ? "Close" : "Freeze";
                         });

}  // namespace
}  // namespace gw::ps_test
