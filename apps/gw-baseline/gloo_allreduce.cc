// Gloo baseline: Gloo's own allreduce algorithms over its TCP transport on loopback, in
// gw-coll-perf's columns. Ranks are forked locally and meet through a FileStore.
//   gw-baseline-gloo --ranks 2 --algo ring-chunked -b 4K -e 64M
// Gloo's algorithms reduce in place, so the timed loop reruns on its own output (values grow
// by a factor n per run, far from overflow for the default -n); one extra run on fresh inputs
// is checked element by element.
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "baseline_common.h"

namespace {

constexpr const char* kUsage =
    "usage: gw-baseline-gloo [--ranks N] [--algo ring|ring-chunked|hd] [-b B] [-e B] [-f F] "
    "[-n N] [-w N]\n";

std::unique_ptr<gloo::Algorithm> make_algo(const std::string& name,
                                           const std::shared_ptr<gloo::Context>& ctx, float* p,
                                           int count) {
  std::vector<float*> ptrs{p};
  if (name == "ring") return std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, count);
  if (name == "hd") {
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
  }
  return std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count);
}

int run_rank(const gwb::Options& o, int rank, const std::string& dir) {
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, o.ranks);
  gloo::rendezvous::FileStore store(dir);
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  if (rank == 0) gwb::print_header(("Gloo " + o.algo).c_str());
  std::vector<float> buf(o.max_bytes / 4);
  gloo::BarrierAllToAll barrier(ctx);
  for (uint64_t bytes : gwb::sizes(o)) {
    const auto count = static_cast<int>(bytes / 4);
    gwb::fill(buf, static_cast<size_t>(count), rank);
    auto algo = make_algo(o.algo, ctx, buf.data(), count);
    algo->run();
    const long long wrong = gwb::count_wrong(buf, static_cast<size_t>(count), o.ranks);
    for (int i = 0; i < o.warmup; ++i) algo->run();
    barrier.run();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) algo->run();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        o.iters;
    if (rank == 0) gwb::print_row(bytes, us, o.ranks, wrong, o.algo);
    if (wrong) {
      std::fprintf(stderr, "gw-baseline-gloo: rank %d: %lld wrong elements at %llu B\n", rank,
                   wrong, static_cast<unsigned long long>(bytes));
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gwb::Options o = gwb::parse(argc, argv, kUsage);
  if (o.algo.empty()) o.algo = "ring-chunked";
  if (o.algo != "ring" && o.algo != "ring-chunked" && o.algo != "hd") {
    std::fprintf(stderr, "gw-baseline-gloo: unknown --algo %s\n%s", o.algo.c_str(), kUsage);
    return 2;
  }
  char tmpl[] = "/tmp/gw-gloo-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("gw-baseline-gloo: mkdtemp");
    return 1;
  }
  std::vector<pid_t> kids;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = run_rank(o, r, tmpl);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gw-baseline-gloo: rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  int failed = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  std::filesystem::remove_all(tmpl);
  return failed ? 1 : 0;
}
