// A rank's process killed with SIGKILL: every other rank learns it (RemoteError naming the
// peer, pending requests failed) within 2 s, and the survivors keep talking. Ranks are
// processes forked before any transport exists, meeting through a file store.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "conformance.h"

namespace gw::conformance {
namespace {

constexpr Nanos kDetectBound = std::chrono::seconds(2);

std::string make_temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gw-conf-XXXXXX").string();
  return mkdtemp(tmpl.data()) ? tmpl : std::string();
}

// What a survivor saw; "" when everything held.
std::string survivor(Group& g, int victim) {
  std::ostringstream bad;
  Endpoint& vep = g.endpoint(victim);
  std::array<uint8_t, 2 * (64 + kGuard)> buf{};
  RecvRequest rr[2] = {{buf.data(), 64, 1, 101, nullptr},
                       {buf.data() + 64 + kGuard, 64, 2, 102, nullptr}};
  auto taken = vep.post_recv(rr);
  if (!taken.ok() || *taken != 2) return "post_recv to the victim: " + taken.status().to_string();
  if (!g.store().set("ready/" + std::to_string(g.rank()), "1").ok()) return "store set failed";

  // Wait for the victim's death to show: both receives failed (and maybe an endpoint error).
  uint64_t first_err_ns = 0;
  int failed_recvs = 0;
  std::array<Completion, 8> out;
  Deadline dl(std::chrono::seconds(10));
  while (failed_recvs < 2 && !dl.expired()) {
    auto n = g.transport().cq().wait(out, dl.remaining());
    if (!n.ok()) {
      if (n.status().code() != Code::kTimeout) bad << "cq: " << n.status().to_string() << "; ";
      break;
    }
    for (size_t i = 0; i < *n; ++i) {
      const Completion& c = out[i];
      if (c.code == Code::kOk) {
        bad << "unexpected OK completion (op " << int(c.op) << ", peer " << c.peer_id << "); ";
        continue;
      }
      if (first_err_ns == 0) first_err_ns = now_ns();
      if (c.peer_id != static_cast<uint32_t>(victim) || c.ep != &vep) {
        bad << "error completion names peer " << c.peer_id << ", not the victim " << victim << "; ";
      }
      if (c.code != Code::kRemoteError) bad << "error code " << code_name(c.code) << "; ";
      if (c.op == Op::kRecv && (c.wr_id == 101 || c.wr_id == 102)) ++failed_recvs;
    }
  }
  if (failed_recvs < 2) bad << "only " << failed_recvs << " of 2 pending receives failed; ";
  auto killed = g.store().get("killed_at", std::chrono::seconds(10));
  if (!killed.ok()) return bad.str() + "no kill time: " + killed.status().to_string();
  if (first_err_ns != 0) {
    auto took = Nanos(static_cast<int64_t>(first_err_ns - std::stoull(*killed)));
    if (took > kDetectBound) {
      bad << "death noticed " << took.count() / 1'000'000 << " ms after SIGKILL (bound 2000); ";
    }
  }
  Status st = vep.status();
  if (st.code() != Code::kRemoteError) bad << "endpoint status " << st.to_string() << "; ";
  if (st.message().find(vep.peer_name()) == std::string_view::npos) {
    bad << "endpoint error does not name '" << vep.peer_name() << "': " << st.to_string() << "; ";
  }
  uint8_t b = 0;
  SendRequest s{&b, 1, 1, 103, nullptr};
  auto sent = vep.post_send({&s, 1});
  if (sent.ok()) bad << "post_send to the dead peer was taken, not refused; ";

  // The survivors still talk to each other.
  Exchange x(g);
  for (int p = 0; p < g.size(); ++p) {
    if (p == g.rank() || p == victim) continue;
    x.recv(p, 9, 4000, 0, 4000);
    x.send(p, 9, 4000, 0);
  }
  Status ok = x.run();
  if (!ok.ok()) bad << "survivors' exchange: " << ok.to_string() << "; ";
  x.verify();
  return bad.str();
}

// Body of one forked rank; returns the exit code. Uses no gtest state except HasFailure.
int rank_main(const TransportCase& c, const std::string& dir, int rank, int n, int victim) {
  auto report = [&](const std::string& what) {
    auto store = make_file_store(dir);
    if (store.ok())
      (void)(*store)->set("result/" + std::to_string(rank), what.empty() ? "ok" : what);
    return what.empty() ? 0 : 1;
  };
  auto store = make_file_store(dir);
  if (!store.ok()) return report("file store: " + store.status().to_string());
  auto t = open_case(c);
  if (!t.ok()) return report("open: " + t.status().to_string());
  auto g = Group::create(*store, std::move(t).value(), rank, n, kStepTimeout);
  if (!g.ok()) return report("Group::create: " + g.status().to_string());
  {  // Every pair works before the kill.
    Exchange x(**g);
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      x.recv(p, 3, 100, 0, 77);
      x.send(p, 3, 77, 0);
    }
    Status s = x.run();
    x.verify();
    if (!s.ok() || ::testing::Test::HasFailure()) return report("warm-up: " + s.to_string());
  }
  if (rank == victim) {
    (void)(*g)->store().set("ready/" + std::to_string(rank), "1");
    std::this_thread::sleep_for(std::chrono::seconds(60));  // killed long before
    return report("victim was never killed");
  }
  std::string bad = survivor(**g, victim);
  if (::testing::Test::HasFailure()) bad += "gtest check failed in the child (see its output)";
  return report(bad);
}

class PeerDeath : public RanksTest {};

TEST_P(PeerDeath, SigkillIsSeenByEveryRankWithin2s) {
  const int n = ranks(), victim = n / 2;
  std::string dir = make_temp_dir();
  ASSERT_FALSE(dir.empty()) << "mkdtemp failed";
  std::fflush(nullptr);  // children must not flush our buffered output again
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) _exit(rank_main(tc(), dir, r, n, victim));
    pids.push_back(pid);
  }
  auto store = make_file_store(dir);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  std::vector<std::string> ready;
  for (int r = 0; r < n; ++r) ready.push_back("ready/" + std::to_string(r));
  Status st = (*store)->wait(ready, kStepTimeout);
  EXPECT_TRUE(st.ok()) << "ranks did not get ready: " << st.to_string();
  if (st.ok()) {
    EXPECT_TRUE((*store)->set("killed_at", std::to_string(now_ns())).ok());
    kill(pids[victim], SIGKILL);
  }
  // Reap everyone before a deadline; stragglers are killed.
  Deadline dl(std::chrono::seconds(30));
  std::vector<int> status(n, -1);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      if (status[r] != -1) continue;
      bool late = dl.expired();
      if (late) kill(pids[r], SIGKILL);
      int ws = 0;
      if (waitpid(pids[r], &ws, late ? 0 : WNOHANG) == pids[r]) {
        status[r] = ws;
        --left;
      }
    }
    std::this_thread::sleep_for(Millis(5));
  }
  for (int r = 0; r < n; ++r) {
    auto res = (*store)->get("result/" + std::to_string(r), Millis(1));
    if (r == victim) {
      EXPECT_TRUE(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL)
          << "victim rank " << r << ": " << (res.ok() ? *res : "no result");
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status[r])) << "rank " << r << " did not exit normally (crash?)";
    EXPECT_EQ(res.ok() ? *res : res.status().to_string(), "ok") << "rank " << r;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Tr, PeerDeath,
                         ::testing::Combine(::testing::ValuesIn(built_cases()),
                                            ::testing::Values(2, 4)),
                         ranks_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PeerDeath);

using PeerClose = TransportTest;

// A peer that sends its last message and closes at once: the message arrives, and the
// receives still pending on that endpoint fail with RemoteError naming the peer. The close
// reaches the receiver together with the data, before it reads anything.
TEST_P(PeerClose, LastMessageThenCloseFailsPendingReceives) {
  auto g = make_groups(tc(), 2);
  ASSERT_EQ(g.size(), 2u);
  std::vector<uint8_t> got(2 * (100 + kGuard), kGuardByte), msg(77);
  fill_pattern(msg.data(), msg.size(), msg_seed(1, 0, 4, 0));
  RecvRequest rr[2] = {{got.data(), 100, 4, 1, nullptr},
                       {got.data() + 100 + kGuard, 100, 4, 2, nullptr}};
  ASSERT_EQ(g[0]->endpoint(1).post_recv(rr).value(), 2u);
  SendRequest sr{msg.data(), msg.size(), 4, 3, nullptr};
  ASSERT_EQ(g[1]->endpoint(0).post_send({&sr, 1}).value(), 1u);
  std::array<Completion, 4> out;
  auto n = g[1]->transport().cq().wait(out, kStepTimeout);
  ASSERT_TRUE(n.ok() && out[0].code == Code::kOk) << n.status().to_string();
  g[1].reset();  // rank 1 leaves

  std::map<uint64_t, Completion> done;
  Deadline dl(kDetectBound);
  while (done.size() < 2 && !dl.expired()) {
    auto k = g[0]->transport().cq().wait(out, dl.remaining());
    for (size_t i = 0; k.ok() && i < *k; ++i) {
      if (out[i].op == Op::kRecv) done[out[i].wr_id] = out[i];
    }
  }
  ASSERT_TRUE(done.count(1)) << "the last message was not delivered";
  EXPECT_EQ(done[1].code, Code::kOk);
  EXPECT_EQ(done[1].len, 77u);
  EXPECT_EQ(check_pattern(got.data(), 77, msg_seed(1, 0, 4, 0)), "");
  ASSERT_TRUE(done.count(2)) << "the peer closed, yet its pending receive did not fail within "
                                "2 s (endpoint status: "
                             << g[0]->endpoint(1).status().to_string() << ")";
  EXPECT_EQ(done[2].code, Code::kRemoteError);
  Status st = g[0]->endpoint(1).status();
  EXPECT_EQ(st.code(), Code::kRemoteError) << st.to_string();
  EXPECT_NE(st.message().find("rank 1"), std::string_view::npos) << st.to_string();
}

INSTANTIATE_TEST_SUITE_P(Tr, PeerClose, ::testing::ValuesIn(built_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PeerClose);

}  // namespace
}  // namespace gw::conformance
