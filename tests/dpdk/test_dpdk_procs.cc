// DPDK driver between processes: net_memif (this process is the server, a helper process the
// client), a peer killed mid-transfer, and net_af_packet over a veth pair between two network
// namespaces this test creates (both ends are helper processes).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "dpdk_test_util.h"
#include "gw_store.h"
#include "gw_transport.h"

namespace gw::dpdktest {
namespace {

namespace fs = std::filesystem;

// A fresh directory for the file store and memif sockets of one test.
struct TempDir {
  TempDir() {
    path = "/tmp/gwdp-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
  static inline int counter = 0;
};

std::string memif(const TempDir& d, int n, const char* role) {
  return "dpdk:vdev=net_memif" + std::to_string(n) + ",role=" + role + ",socket=" + d.path +
         "/memif.sock";
}

std::unique_ptr<Group> join(const std::string& spec, const std::string& dir, int rank) {
  auto store = make_file_store(dir);
  if (!store.ok()) {
    ADD_FAILURE() << store.status().to_string();
    return nullptr;
  }
  auto t = Transport::open(spec);
  if (!t.ok()) {
    ADD_FAILURE() << "open " << spec << ": " << t.status().to_string();
    return nullptr;
  }
  auto g = Group::create(*store, std::move(t).value(), rank, 2, std::chrono::seconds(60));
  if (!g.ok()) {
    ADD_FAILURE() << "Group::create: " << g.status().to_string();
    return nullptr;
  }
  return std::move(g).value();
}

// A unix SEQPACKET socket bound at path (memif's kind); -1 on failure.
int bind_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What a run killed with SIGKILL leaves: a bound socket file nobody listens on.
void leave_stale_socket(const std::string& path) {
  int fd = bind_unix(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_TRUE(fs::is_socket(path));
}

// Data packets this side sent (first transmissions and retransmissions), -1 without a run.
int64_t memif_plan(int n, const std::string& extra, int reps, bool stale = false,
                   bool jumbo = false) {
  TempDir d;
  if (stale) leave_stale_socket(d.path + "/memif.sock");
  pid_t pid = spawn_helper(
      {memif(d, n, "client") + extra, d.path, "1", jumbo ? "jumbo" : "plan", std::to_string(reps)});
  EXPECT_GT(pid, 0);
  if (pid <= 0) return -1;
  auto g = join(memif(d, n, "server") + extra, d.path, 0);
  int64_t data_pkts = -1;
  if (g) {
    Status st =
        run_plan(*g, 1, jumbo ? jumbo_sizes() : default_sizes(), reps, std::chrono::seconds(120));
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(finish(*g, 1, std::chrono::seconds(60)).ok());
    auto s = g->transport().stats();
    std::printf(
        "memif: pkts_sent %lu retransmits %lu zero_copy_pkts %lu copied %lu "
        "bad_checksum %lu\n",
        s["pkts_sent"], s["retransmits"], s["zero_copy_pkts"], s["copied_pkts"], s["bad_checksum"]);
    data_pkts = static_cast<int64_t>(s["zero_copy_pkts"] + s["copied_pkts"]);
  } else {
    ::kill(pid, SIGKILL);
  }
  EXPECT_EQ(wait_helper(pid), 0) << "the client process failed (its stderr is above)";
  return data_pkts;
}

// The jumbo plan's payload bytes one way (each size once).
uint64_t jumbo_bytes() {
  uint64_t b = 0;
  for (size_t s : jumbo_sizes()) b += s;
  return b;
}

TEST(DpdkMemif, TwoProcessesAllSizesBitExact) { memif_plan(0, "", 2); }

TEST(DpdkMemif, TwoProcessesUnderLossBitExact) {
  memif_plan(1, ",tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01,rx_drop=0.005", 1);
}

// memif's default MTU is a jumbo one (32 KiB of payload per packet; 1500-byte frames cost
// ~22x the per-packet work per byte): sizes around its segment boundaries, odd ones, 1 MiB and
// 8 MiB arrive bit-exact, in a few data packets per 32 KiB.
TEST(DpdkMemif, JumboFramesAllSizesBitExact) {
  const int64_t pkts = memif_plan(5, "", 1, false, true);
  ASSERT_GT(pkts, 0);
  EXPECT_LT(static_cast<uint64_t>(pkts), jumbo_bytes() / 16384) << "frames are not jumbo";
}

// The same jumbo transfers under injected loss, duplication and reordering, and with a
// checksum on each side (as corruption needs), still arrive bit-exact.
TEST(DpdkMemif, JumboFramesUnderLossBitExact) {
  memif_plan(6, ",tx_drop=0.02,tx_dup=0.01,tx_reorder=0.01,rx_drop=0.01,checksum=on", 1, false,
             true);
}

// A standard MTU on memif, asked for, still works both ways.
TEST(DpdkMemif, StandardMtuBitExact) {
  const int64_t pkts = memif_plan(7, ",mtu=1500", 1);
  ASSERT_GT(pkts, 0);
  EXPECT_GT(static_cast<uint64_t>(pkts), ((4u << 20) + 70000) / 1500) << "frames are jumbo";
}

// Issue 20: a socket file left by a killed run used to fail the next run ("Address already
// in use"); the server now removes it and the run completes.
TEST(DpdkMemif, StaleSocketOfAKilledRunIsCleared) { memif_plan(3, "", 1, true); }

// A socket with a live listener is another run's: refused at once, saying so, not removed.
TEST(DpdkMemif, LiveSocketIsRefusedWithAClearError) {
  TempDir d;
  const std::string path = d.path + "/memif.sock";
  int fd = bind_unix(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  auto t = Transport::open(memif(d, 4, "server"));
  ::close(fd);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kUnavailable);
  EXPECT_NE(t.status().to_string().find("live server"), std::string::npos)
      << t.status().to_string();
  EXPECT_NE(t.status().to_string().find(path), std::string::npos);
  EXPECT_TRUE(fs::is_socket(path)) << "another run's socket must not be removed";
}

TEST(DpdkMemif, PeerKilledMidTransferFailsWithin2s) {
  TempDir d;
  pid_t pid = spawn_helper({memif(d, 2, "client"), d.path, "1", "sink"});
  ASSERT_GT(pid, 0);
  auto g = join(memif(d, 2, "server"), d.path, 0);
  if (!g) {
    ::kill(pid, SIGKILL);
    wait_helper(pid);
    return;
  }
  // Some messages arrive, then the peer dies while more are in flight.
  ASSERT_TRUE(stream_sends(*g, 1, 4 << 20, 3, std::chrono::seconds(60)).ok());
  std::vector<uint8_t> big(8 << 20, 3);
  SendRequest s{big.data(), big.size(), 0, 99, nullptr};
  ASSERT_EQ(g->endpoint(1).post_send({&s, 1}).value(), 1u);
  Completion c[8];
  (void)g->transport().cq().poll(c);
  ::kill(pid, SIGKILL);
  auto t0 = Clock::now();
  EXPECT_EQ(wait_helper(pid), -SIGKILL);
  bool failed = false;
  while (!failed && Clock::now() - t0 < std::chrono::seconds(10)) {
    auto n = g->transport().cq().wait(c, std::chrono::milliseconds(100));
    for (size_t i = 0; n.ok() && i < *n; ++i) {
      if (c[i].op == Op::kSend && c[i].wr_id == 99) {
        EXPECT_EQ(c[i].code, Code::kRemoteError);
        failed = true;
      }
    }
  }
  auto ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
  EXPECT_TRUE(failed) << "the send to the killed peer never failed";
  EXPECT_LE(ms, 2000) << "dead peer seen after " << ms << " ms";
  EXPECT_EQ(g->endpoint(1).status().code(), Code::kRemoteError);
  std::printf("killed peer seen after %ld ms: %s\n", static_cast<long>(ms),
              g->endpoint(1).status().to_string().c_str());
}

// Two network namespaces joined by a veth pair; addresses exist only inside them.
TEST(DpdkAfPacket, VethBetweenNamespacesBitExact) {
  Veth v("dp", std::to_string(::getpid() % 100000));
  if (!v.why().empty()) GTEST_SKIP() << "af_packet over veth: " << v.why();
  TempDir d;
  pid_t a = spawn_helper({"dpdk:vdev=net_af_packet0,iface=" + v.iface[0], d.path, "0", "plan", "1"},
                         v.ns[0]);
  pid_t b = spawn_helper({"dpdk:vdev=net_af_packet0,iface=" + v.iface[1], d.path, "1", "plan", "1"},
                         v.ns[1]);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(wait_helper(a), 0) << "rank 0 in " << v.ns[0] << " failed (stderr above)";
  EXPECT_EQ(wait_helper(b), 0) << "rank 1 in " << v.ns[1] << " failed (stderr above)";
}

}  // namespace
}  // namespace gw::dpdktest
