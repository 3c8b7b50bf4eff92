// gw-coll-perf: nccl-tests-like benchmark of gradwire's collectives. Options, and the local
// launcher that forks/execs --ranks copies of itself with GW_RANK/GW_WORLD_SIZE/GW_MASTER_*.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "coll_perf.h"

namespace gw::collperf {
namespace {

bool parse_bytes(const std::string& text, uint64_t* out) {
  size_t i = 0;
  uint64_t v = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) v = v * 10 + (text[i] - '0');
  if (i == 0) return false;
  std::string s = text.substr(i);
  int shift = 0;
  if (s == "K" || s == "k" || s == "KiB")
    shift = 10;
  else if (s == "M" || s == "m" || s == "MiB")
    shift = 20;
  else if (s == "G" || s == "g" || s == "GiB")
    shift = 30;
  else if (!s.empty() && s != "B")
    return false;
  *out = v << shift;
  return true;
}

}  // namespace

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::kAllreduce:
      return "allreduce";
    case Coll::kReduceScatter:
      return "reduce_scatter";
    case Coll::kAllgather:
      return "allgather";
    case Coll::kBroadcast:
      return "broadcast";
    case Coll::kAlltoall:
      return "alltoall";
    case Coll::kGather:
      return "gather";
    case Coll::kScatter:
      return "scatter";
    case Coll::kAlltoallv:
      return "alltoallv";
  }
  return "?";
}

Options parse_options(int argc, char** argv, int* exit_code) {
  Options o;
  CLI::App app{
      "gw-coll-perf: nccl-tests-like benchmark of gradwire collectives.\n"
      "  local:    gw-coll-perf --ranks 4 -b 4K -e 256M -f 2\n"
      "  launched: GW_RANK/GW_WORLD_SIZE/GW_MASTER_ADDR/GW_MASTER_PORT (or torchrun, Open MPI,\n"
      "            Slurm variables); without either, one rank."};
  std::string b = "8", e = "64M", step, op = "sum", dt = "float32", algo = "auto",
              coll = "allreduce";
  app.add_option("-b,--minbytes", b, "smallest size in bytes (suffixes K/M/G; default 8)");
  app.add_option("-e,--maxbytes", e, "largest size (default 64M)");
  app.add_option("-f,--stepfactor", o.factor, "multiply the size by this (default 2)");
  app.add_option("-i,--stepbytes", step, "add this to the size instead of -f");
  app.add_option("-n,--iters", o.iters, "timed iterations per size (default 20)");
  app.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations per size (default 5)");
  app.add_option("-c,--check", o.check, "check results element by element (1, default) or not (0)");
  app.add_option("-o,--op", op, "sum, prod, min, max, avg");
  app.add_option("-d,--datatype", dt, "float32, float64, float16, bfloat16, int32, int64, uint8");
  app.add_option("--algo", algo, "allreduce algorithm: ring, rd or auto");
  app.add_option("--coll", coll,
                 "allreduce (default), reduce_scatter, allgather, broadcast, alltoall, gather, "
                 "scatter, alltoallv (equal parts, as osu_alltoallv)");
  app.add_option("-r,--root", o.root, "broadcast, gather and scatter root (default 0)");
  app.add_option(
      "--bruck-max", o.bruck_max_bytes,
      "alltoall: Bruck for blocks up to this many bytes (coll.alltoall_bruck_max_bytes)");
  app.add_option("--tree-max", o.tree_max_bytes,
                 "gather/scatter: binomial tree for blocks up to this many bytes "
                 "(coll.gather_tree_max_bytes)");
  app.add_flag("--inplace", o.in_place, "in-place operation (send buffer = receive buffer)");
  app.add_option("--idle-s", o.idle_s,
                 "after the sizes, every rank makes no call for this long (a trainer computing; "
                 "the progress thread serves the peers), then a barrier; rank 0 prints a row "
                 "'0 idle SECONDS' (gw-compare reads the CPU taken meanwhile)");
  app.add_option("-t,--transport", o.transport, "transport spec, e.g. tcp:iface=lo,streams=4");
  app.add_option("--ranks", o.ranks, "spawn this many local processes of this binary");
  app.add_option("--chunk", o.chunk_bytes, "ring chunk in bytes (default coll.chunk_bytes)");
  app.add_option("--rd-max", o.rd_max_bytes, "auto: rd up to this many bytes (coll.rd_max_bytes)");
  app.add_option("--timeout", o.timeout_ms, "timeout of one collective in ms (default 60000)");
  app.add_flag("--json", o.json, "one JSON object per size instead of the table");
  app.add_flag("--device", o.device,
               "buffers in GPU memory (CUDA; allreduce only): inputs are copied in and results "
               "out around the checked run, never inside the timed loop");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    *exit_code = app.exit(err);
    return o;
  }
  auto bad = [&](const std::string& what) {
    std::fprintf(stderr, "gw-coll-perf: %s\n", what.c_str());
    *exit_code = 2;
    return o;
  };
  if (!parse_bytes(b, &o.min_bytes) || !parse_bytes(e, &o.max_bytes) ||
      (!step.empty() && !parse_bytes(step, &o.step_bytes)))
    return bad("bad size (use e.g. 8, 4K, 256M)");
  if (o.min_bytes > o.max_bytes) return bad("-b is larger than -e");
  if (o.step_bytes == 0 && o.factor <= 1) return bad("-f must be > 1");
  auto pd = parse_dtype(dt);
  auto po = parse_op(op);
  auto pa = parse_algo(algo);
  if (!pd || !po || !pa) return bad("unknown dtype, op or algo: " + dt + ", " + op + ", " + algo);
  o.dtype = *pd;
  o.op = *po;
  o.algo = *pa;
  if (coll == "allreduce")
    o.coll = Coll::kAllreduce;
  else if (coll == "reduce_scatter")
    o.coll = Coll::kReduceScatter;
  else if (coll == "allgather")
    o.coll = Coll::kAllgather;
  else if (coll == "broadcast")
    o.coll = Coll::kBroadcast;
  else if (coll == "alltoall")
    o.coll = Coll::kAlltoall;
  else if (coll == "gather")
    o.coll = Coll::kGather;
  else if (coll == "scatter")
    o.coll = Coll::kScatter;
  else if (coll == "alltoallv")
    o.coll = Coll::kAlltoallv;
  else
    return bad("unknown collective " + coll);
  const bool blocks = o.coll == Coll::kAlltoall || o.coll == Coll::kGather ||
                      o.coll == Coll::kScatter || o.coll == Coll::kAlltoallv;
  if (blocks && (o.in_place || o.device)) return bad(coll + ": no --inplace or --device here");
  if (o.iters < 1 || o.warmup < 0 || o.ranks < 0 || o.ranks > 256 || o.timeout_ms < 1)
    return bad("need -n >= 1, -w >= 0, 0 <= --ranks <= 256, --timeout >= 1");
  return o;
}

int spawn_local(int argc, char** argv, const Options& opt) {
  auto picked = pick_store_port();
  if (!picked.ok()) {
    std::fprintf(stderr, "gw-coll-perf: %s\n", picked.status().to_string().c_str());
    return 1;
  }
  const uint16_t port = *picked;
  // Children get the same arguments without --ranks, plus the launcher variables.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" || a == "-t" || a == "--transport") {  // --transport is re-added below
      ++i;
      continue;
    }
    if (a.rfind("--ranks=", 0) == 0 || a.rfind("--transport=", 0) == 0) continue;
    args.push_back(argv[i]);
  }
  std::string spec = opt.transport.empty() ? "tcp:iface=lo" : opt.transport;
  std::string targ = "--transport=" + spec;
  args.push_back(targ.data());
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < opt.ranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("gw-coll-perf: fork");
      for (pid_t p : pids) ::kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      ::setenv("GW_RANK", std::to_string(r).c_str(), 1);
      ::setenv("GW_WORLD_SIZE", std::to_string(opt.ranks).c_str(), 1);
      ::setenv("GW_LOCAL_WORLD_SIZE", std::to_string(opt.ranks).c_str(), 1);
      ::setenv("GW_MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("GW_MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execv("/proc/self/exe", args.data());
      std::perror("gw-coll-perf: exec");
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  // Reap all; after a failure the others get the collective timeout plus a grace period to
  // report their own error, then they are killed.
  int result = 0, alive = opt.ranks;
  auto kill_at = std::chrono::steady_clock::time_point::max();
  while (alive > 0) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (std::chrono::steady_clock::now() >= kill_at) {
        for (pid_t& p : pids) {
          if (p > 0) ::kill(p, SIGKILL);
        }
        std::fprintf(stderr, "gw-coll-perf: killed the ranks left after a failure\n");
        kill_at = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int rank = 0;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] == pid) {
        rank = static_cast<int>(i);
        pids[i] = -1;
      }
    }
    --alive;
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (WIFSIGNALED(st))
      std::fprintf(stderr, "gw-coll-perf: rank %d died of signal %d\n", rank, WTERMSIG(st));
    if (code != 0 && result == 0) {
      result = code;
      kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(opt.timeout_ms + 3000);
    }
  }
  return result;
}

}  // namespace gw::collperf

int main(int argc, char** argv) {
  int exit_code = -1;
  auto opt = gw::collperf::parse_options(argc, argv, &exit_code);
  if (exit_code >= 0) return exit_code;
  ::signal(SIGPIPE, SIG_IGN);  // a dead peer gives an error, not a silent death
  if (opt.ranks > 0) return gw::collperf::spawn_local(argc, argv, opt);
  return gw::collperf::run_rank(opt);
}
