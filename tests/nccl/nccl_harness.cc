// gw-nccl-harness: drives libnccl-net-gradwire.so as NCCL does, in 2..4 forked processes.
//   gw-nccl-harness PLUGIN.so VERSION CASE RANKS TRANSPORT [ROUNDS]
// VERSION 8 or 12 (the ncclNetPlugin_vN table used); CASE basic|mismatch|death|badreg|lat|bw;
// TRANSPORT a gradwire spec for GW_NCCL_TRANSPORT, "{dir}" replaced by the run's temporary
// directory (memif sockets). Each rank gets GW_RANK (dpdk role=auto picks server/client by it).
// Exit 0 when every rank passed (case death: rank 1 must die by SIGKILL), 77 when the
// transport cannot be opened here (meson's skip), 1 otherwise.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "harness_cases.h"

using namespace gw::nccltest;

namespace {

constexpr int kSkip = 77;

int run_rank(const std::string& plugin, int version, const std::string& test, int rank,
             const Ctx& ctx) {
  Net net(plugin, version, rank);
  ncclResult_t r = net.init();
  if (r != ncclSuccess) {
    std::fprintf(stderr, "[rank %d] init failed (%d): transport not available here\n", rank, r);
    return kSkip;
  }
  int ndev = 0;
  CHECK(net.devices(&ndev) == ncclSuccess && ndev == 1, "devices: %d", ndev);
  std::string name;
  int ptr = 0, speed = 0, max_recvs = 0;
  CHECK(net.props(0, &name, &ptr, &speed, &max_recvs) == ncclSuccess, "getProperties");
  CHECK((ptr & GW_NCCL_PTR_HOST) && max_recvs >= 8 && speed > 0, "properties");
  if (rank == 0) {
    std::fprintf(stderr, "plugin v%d: device 0 = %s, ptrSupport 0x%x, %d Mbps, maxRecvs %d\n",
                 version, name.c_str(), ptr, speed, max_recvs);
  }
  Mesh m = connect_mesh(net, ctx.dir, ctx.ranks, 20'000);
  if (test == "basic")
    case_basic(net, m, ctx);
  else if (test == "mismatch")
    case_mismatch(net, m, ctx);
  else if (test == "death")
    case_death(net, m, ctx);
  else if (test == "badreg")
    case_badreg(net, m, ctx);
  else if (test == "lat")
    bench_lat(net, m, ctx);
  else if (test == "bw")
    bench_bw(net, m, ctx);
  else
    die("unknown case %s", test.c_str());
  if (test != "death") close_mesh(net, m);  // a dead peer's comms are left to process exit
  return 0;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

/// memif: the client (rank 1) starts once the server's socket exists; a client that comes
/// first can miss the server and its link then never comes up (seen in 1 of 6 runs).
void wait_for_socket(const std::string& spec) {
  size_t at = spec.find("socket=");
  if (spec.find("memif") == std::string::npos || at == std::string::npos) return;
  std::string path = spec.substr(at + 7, spec.find(',', at) - at - 7);
  for (int i = 0; i < 4000 && !std::filesystem::exists(path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s PLUGIN.so VERSION CASE RANKS TRANSPORT [ROUNDS]\n", argv[0]);
    return 2;
  }
  const std::string plugin = argv[1], test = argv[3];
  const int version = std::atoi(argv[2]);
  Ctx ctx;
  ctx.ranks = std::atoi(argv[4]);
  if (argc > 6) ctx.rounds = std::atoi(argv[6]);
  if (ctx.ranks < 2 || ctx.ranks > 4) return 2;
  if (test != "basic" && ctx.ranks != 2) {
    std::fprintf(stderr, "case %s runs with 2 ranks\n", test.c_str());
    return 2;
  }
  char tmpl[] = "/tmp/gw-nccl.XXXXXX";
  CHECK(mkdtemp(tmpl), "mkdtemp");
  ctx.dir = tmpl;
  const std::string spec = replace_all(argv[5], "{dir}", ctx.dir);
  std::fflush(nullptr);
  // SIGCHLD is blocked here and taken by sigtimedwait below: the parent sleeps until a rank
  // ends. Polling waitpid every 5 ms woke the parent 200 times a second, and each wake-up
  // preempted one of the two busy-polling ranks on a 2-core machine (bw: 3x the context
  // switches of gw-perf, whose parent sleeps in waitpid).
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < ctx.ranks; ++r) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
      sigprocmask(SIG_UNBLOCK, &chld, nullptr);
      // GW_NCCL_BENCH_PIN=1: rank r on the r-th allowed CPU, as gw-perf --pin.
      if (const char* pin = std::getenv("GW_NCCL_BENCH_PIN"); pin && std::atoi(pin) == 1) {
        cpu_set_t allowed, one;
        CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
        int want = r % CPU_COUNT(&allowed), c = 0;
        for (; c < CPU_SETSIZE; ++c)
          if (CPU_ISSET(c, &allowed) && want-- == 0) break;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
      }
      // Before the plugin is loaded: it reads these at init, as under NCCL.
      setenv("GW_RANK", std::to_string(r).c_str(), 1);
      setenv("GW_NCCL_TRANSPORT", spec.c_str(), 1);
      setenv("GW_NCCL_OOB_IFACE", "lo", 0);
      _exit(run_rank(plugin, version, test, r, ctx));
    }
    pids.push_back(pid);
    if (r == 0) wait_for_socket(spec);
  }
  // Bounded: a hang anywhere is a failure, never a stuck CI job.
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::seconds(test == "bw" ? 300 : 60);
  bool killed = false;
  std::vector<int> status(ctx.ranks, -1);
  for (int left = ctx.ranks; left > 0;) {
    for (int r = 0; r < ctx.ranks; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left == 0) break;
    const auto now = Clock::now();
    if (now > end && !killed) {
      std::fprintf(stderr, "FAIL: ranks still running at the time limit; killing them\n");
      for (int r = 0; r < ctx.ranks; ++r)
        if (status[r] == -1) kill(pids[r], SIGKILL);
      killed = true;
    }
    // Until a child ends or the deadline (then every 100 ms while the killed ranks go).
    auto wait = killed ? std::chrono::nanoseconds(std::chrono::milliseconds(100)) : end - now;
    if (wait < std::chrono::milliseconds(1)) wait = std::chrono::milliseconds(1);
    timespec ts{static_cast<time_t>(wait.count() / 1000000000),
                static_cast<long>(wait.count() % 1000000000)};
    sigtimedwait(&chld, nullptr, &ts);  // EAGAIN (deadline) and EINTR both loop
  }
  std::filesystem::remove_all(ctx.dir);
  bool ok = true, skip = false;
  for (int r = 0; r < ctx.ranks; ++r) {
    int want = test == "death" && r == 1 ? 128 + SIGKILL : 0;
    if (status[r] == kSkip)
      skip = true;
    else if (status[r] != want)
      ok = false;
    if (status[r] != want) std::fprintf(stderr, "rank %d: exit %d (want %d)\n", r, status[r], want);
  }
  if (skip) return kSkip;
  std::printf("%s: %s v%d, %d ranks over %s\n", ok ? "PASS" : "FAIL", test.c_str(), version,
              ctx.ranks, spec.c_str());
  return ok ? 0 : 1;
}
