// gw-ps-perf: parameter-server push+pull against size, beside the ring allreduce of lib/coll on
// the same transport, workers and sizes. One PS iteration (every worker pushes S bytes, the
// servers sum them under BSP, every worker pulls the S-byte sum) computes what one allreduce
// of S bytes computes, so the two times compare directly.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "gw_ps.h"
#include "ps_launch.h"
#ifdef GW_HAVE_COLL
#include "gw_coll.h"
#endif

namespace gw::psapp {
namespace {

constexpr const char* kApp = "gw-ps-perf";

struct Options {
  int ranks = 0, servers = 1, iters = 20, warmup = 3;
  std::vector<std::string> sizes{"4K", "64K", "1M", "4M", "16M"};
  std::string transport = "tcp:iface=lo", csv;
  int64_t timeout_ms = 60000;
  bool no_ring = false, threads = false;
};

Result<uint64_t> parse_size(const std::string& t) {
  size_t i = 0;
  uint64_t v = 0;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i)
    v = v * 10 + static_cast<uint64_t>(t[i] - '0');
  const std::string s = t.substr(i);
  int shift = s.empty()              ? 0
              : s == "K" || s == "k" ? 10
              : s == "M" || s == "m" ? 20
              : s == "G"             ? 30
                                     : -1;
  if (i == 0 || shift < 0 || v == 0 || (v << shift) % 4) {
    return Status(Code::kInvalidArgument, "bad size '" + t + "' (e.g. 4K, 1M; a multiple of 4)");
  }
  return v << shift;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class F>
Result<double> time_iters(const Options& o, F&& step) {
  std::vector<double> t;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const auto t0 = Clock::now();
    GW_RETURN_IF_ERROR(step(i));
    if (i >= o.warmup)
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return median(t);
}

// Worker side of the PS phase: per size, median µs of push + pull (checked: the pulled round
// sum of worker i pushing i+1 everywhere is W(W+1)/2).
Status ps_worker(Group& g, const Options& o, const PsOptions& po, const std::vector<KeySpec>& keys,
                 std::vector<double>* us) {
  GW_ASSIGN_OR_RETURN(auto w, PsWorker::create(g, keys, po));
  const float mine = static_cast<float>(w->worker_index() + 1);
  const float want = static_cast<float>(w->workers() * (w->workers() + 1) / 2);
  const Nanos tmo = Millis(o.timeout_ms);
  for (const KeySpec& k : keys) {
    std::vector<float> grad(k.count, mine), par(k.count);
    GW_ASSIGN_OR_RETURN(auto gmr, w->register_memory(grad));
    GW_ASSIGN_OR_RETURN(auto pmr, w->register_memory(par));
    GW_ASSIGN_OR_RETURN(double t, time_iters(o, [&](int) -> Status {
                          GW_ASSIGN_OR_RETURN(PsHandle h, w->push(k.key, grad, &gmr));
                          GW_RETURN_IF_ERROR(w->wait(h, tmo));
                          GW_ASSIGN_OR_RETURN(h, w->pull(k.key, par, &pmr));
                          return w->wait(h, tmo);
                        }));
    if (par.front() != want || par.back() != want) {
      return Status(Code::kInternal, "PS result of key " + std::to_string(k.key) + " is " +
                                         std::to_string(par.front()) + ", expected " +
                                         std::to_string(want));
    }
    us->push_back(t);
  }
  return w->finish(tmo);
}

#ifdef GW_HAVE_COLL
Status ring_worker(const Launched& l, const Options& o, const std::vector<KeySpec>& keys,
                   std::vector<double>* us) {
  Launched sub = l;
  sub.rank = l.rank - o.servers;
  sub.size = l.size - o.servers;
  GW_ASSIGN_OR_RETURN(auto g, make_group(sub, o.transport, "ps-perf/ring", Millis(o.timeout_ms)));
  GW_ASSIGN_OR_RETURN(auto comm, Communicator::create(*g));
  CallOptions call;
  call.algo = Algo::kRing;
  call.timeout = Millis(o.timeout_ms);
  for (const KeySpec& k : keys) {
    std::vector<float> in(k.count, static_cast<float>(sub.rank + 1)), out(k.count);
    GW_ASSIGN_OR_RETURN(double t, time_iters(o, [&](int) {
                          return comm->allreduce(in.data(), out.data(), k.count, DataType::kFloat32,
                                                 ReduceOp::kSum, call);
                        }));
    const float want = static_cast<float>(sub.size * (sub.size + 1) / 2);
    if (out.front() != want || out.back() != want)
      return Status(Code::kInternal, "ring allreduce result is wrong");
    us->push_back(t);
  }
  return comm->barrier();
}
#endif

int run(const Options& o, const Launched& l) {
  const int workers = l.size - o.servers;
  if (workers < 1) return fail(kApp, Status(Code::kInvalidArgument, "no worker rank left"));
  std::vector<KeySpec> keys;
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    auto b = parse_size(o.sizes[i]);
    if (!b.ok()) return fail(kApp, b.status());
    keys.push_back({i, *b / 4});
  }
  PsOptions po;
  po.servers = o.servers;
  po.mode = Consistency::kBsp;
  po.timeout = Millis(o.timeout_ms);
  std::vector<double> ps_us, ring_us;
  {
    auto g = make_group(l, o.transport, "ps-perf/ps", Millis(o.timeout_ms));
    if (!g.ok()) return fail(kApp, g.status());
    Status st;
    if (l.rank < o.servers) {
      auto s = PsServer::create(**g, keys, po, make_sum_updater());
      st = s.ok() ? (*s)->serve(Millis(o.timeout_ms) * static_cast<int64_t>(keys.size() + 1))
                  : s.status();
    } else {
      st = ps_worker(**g, o, po, keys, &ps_us);
    }
    if (!st.ok()) return fail(kApp, st.with_context("PS phase"));
    g->reset();
    st = end_phase(l, "ps-perf/ps", Millis(o.timeout_ms));
    if (!st.ok()) return fail(kApp, st.with_context("PS phase"));
  }
  const char* ring_note = "";
#ifdef GW_HAVE_COLL
  if (!o.no_ring && l.rank >= o.servers) {
    Status st = ring_worker(l, o, keys, &ring_us);
    if (!st.ok()) return fail(kApp, st.with_context("ring phase"));
  }
#else
  ring_note = " (ring allreduce not built: lib/coll is disabled in this build)";
#endif
  if (Status st = leave(l, Millis(o.timeout_ms)); !st.ok()) return fail(kApp, st);
  if (l.rank != o.servers) return 0;
  std::printf(
      "# gw-ps-perf: %s, %d server(s), %d worker(s), float32 sum, median of %d "
      "iterations%s\n",
      o.transport.c_str(), o.servers, workers, o.iters, ring_note);
  std::printf("# one PS iteration = push S + pull S (BSP, sum updater); algbw = S / time\n");
  std::printf("%12s %12s %12s %12s %12s %10s\n", "size_B", "ps_us", "ps_GB/s", "ring_us",
              "ring_GB/s", "ps/ring");
  std::ofstream csv;
  if (!o.csv.empty()) {
    csv.open(o.csv);
    csv << "size_bytes,servers,workers,ps_us,ring_us\n";
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const double bytes = static_cast<double>(keys[i].count * 4);
    const double r = i < ring_us.size() ? ring_us[i] : 0;
    std::printf("%12.0f %12.1f %12.3f %12.1f %12.3f %10.2f\n", bytes, ps_us[i],
                bytes / ps_us[i] / 1e3, r, r > 0 ? bytes / r / 1e3 : 0.0,
                r > 0 ? ps_us[i] / r : 0.0);
    if (csv)
      csv << bytes << ',' << o.servers << ',' << workers << ',' << ps_us[i] << ',' << r << '\n';
  }
  return 0;
}

}  // namespace
}  // namespace gw::psapp

int main(int argc, char** argv) {
  gw::psapp::Options o;
  CLI::App app{
      "gw-ps-perf: parameter-server push+pull throughput against size, beside the ring "
      "allreduce on the same transport and ranks.\n"
      "  local:    gw-ps-perf --ranks N --servers K [options]\n"
      "  launched: GW_RANK/... (or torchrun, Open MPI, Slurm variables)",
      "gw-ps-perf"};
  app.add_option("--ranks", o.ranks, "start this many local processes (servers + workers)")
      ->check(CLI::Range(2, 64));
  app.add_option("--servers", o.servers, "server ranks")->capture_default_str();
  app.add_option("-s,--sizes", o.sizes, "message sizes")->delimiter(',')->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed iterations per size")->capture_default_str();
  app.add_option("-t,--transport", o.transport, "transport spec")->capture_default_str();
  app.add_option("--csv", o.csv, "also write the results as CSV");
  app.add_flag("--no-ring", o.no_ring, "skip the ring allreduce");
  app.add_option("--timeout-ms", o.timeout_ms, "setup and per-wait timeout")->capture_default_str();
  app.add_flag("--threads", o.threads,
               "with --ranks: run the ranks as threads of this process (in-process store), as "
               "transports that connect only within a process need (dpdk:ring=NAME)");
  CLI11_PARSE(app, argc, argv);
  if (o.iters < 1 || o.warmup < 0) {
    std::fprintf(stderr, "gw-ps-perf: --iters must be >= 1\n");
    return 2;
  }
  return gw::psapp::start("gw-ps-perf", o.ranks, o.threads, argv, gw::Millis(o.timeout_ms),
                          [&](const gw::psapp::Launched& l) { return gw::psapp::run(o, l); });
}
