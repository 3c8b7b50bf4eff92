// gw-ps-train: a small real training job on the parameter server. Servers hold the model,
// workers compute true gradients on their own shard of a Gaussian-blob data set; BSP, ASP and
// SSP(s) run one after the other (each on a fresh Group), optionally with one straggling
// worker; worker 0 reports loss/accuracy against iterations and wall time (table, CSV, SVG).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <thread>

#include "gw_ps.h"
#include "ps_launch.h"
#include "train_model.h"
#include "train_report.h"

namespace gw::psapp {
namespace {

constexpr const char* kApp = "gw-ps-train";

struct Options {
  int ranks = 0, servers = 1, iters = 300, batch = 32, dim = 32, hidden = 32, eval_every = 5;
  int staleness = 2;
  size_t samples = 8192;
  float lr = 0.05f, momentum = 0.5f;
  double target = 0.52;
  uint32_t seed = 1;
  std::vector<std::string> modes{"bsp", "asp", "ssp"};
  std::vector<int> straggler_ms{0};
  std::string transport = "tcp:iface=lo", csv = "ps-train.csv", svg = "ps-train.svg";
  int64_t timeout_ms = 120000;
  bool threads = false;
};

struct RunResult {
  Series series;
  double wall_s = 0;      // until the last worker finished
  int64_t max_stale = 0;  // largest staleness any server served
  uint64_t deferred = 0;  // pulls that had to wait
};

std::string label_of(const std::string& mode, int staleness, int straggler_ms) {
  std::string l = mode == "ssp" ? "ssp(" + std::to_string(staleness) + ")" : mode;
  if (straggler_ms > 0) l += "+straggler " + std::to_string(straggler_ms) + "ms";
  return l;
}

Status run_server(Group& g, const Options& o, const PsOptions& po, const Model& m,
                  const std::string& prefix) {
  GW_ASSIGN_OR_RETURN(
      auto s, PsServer::create(g, m.keys(), po, make_sgd_updater(o.lr, o.momentum), m.init()));
  GW_RETURN_IF_ERROR(s->serve(Millis(o.timeout_ms)));
  const auto& st = s->stats();
  return g.store().set(prefix + "/stats/" + std::to_string(g.rank()),
                       std::to_string(st.max_staleness) + " " + std::to_string(st.deferred_pulls));
}

// The straggler's extra work: `delay` of not touching the PS. The transport's progress thread
// serves its peers meanwhile; with transport.progress=caller it is driven every millisecond
// instead, as a polling transport (dpdk) then needs to keep its peers' trust.
Status straggle(PsWorker& w, Transport& t, Nanos delay) {
  if (t.background()) {
    std::this_thread::sleep_for(delay);
    return Status();
  }
  const Deadline dl(delay);
  while (!dl.expired()) {
    std::this_thread::sleep_for(std::min<Nanos>(dl.remaining(), Millis(1)));
    GW_RETURN_IF_ERROR(w.progress());
  }
  return Status();
}

Status run_worker(Group& g, const Options& o, const PsOptions& po, const Model& m, const Data& data,
                  const Data& eval, int straggler_ms, const std::string& prefix, RunResult* out) {
  GW_ASSIGN_OR_RETURN(auto w, PsWorker::create(g, m.keys(), po));
  const auto& keys = m.keys();
  const int idx = w->worker_index(), nw = w->workers();
  const bool straggler = straggler_ms > 0 && idx == nw - 1;
  // This worker's shard of the data.
  const size_t lo = data.n() * static_cast<size_t>(idx) / static_cast<size_t>(nw);
  const size_t hi = data.n() * static_cast<size_t>(idx + 1) / static_cast<size_t>(nw);
  std::vector<std::vector<float>> params(keys.size()), grads;
  std::vector<MemoryRegion> pmr, gmr;
  for (size_t k = 0; k < keys.size(); ++k) {
    params[k].resize(keys[k].count);
    GW_ASSIGN_OR_RETURN(auto mr, w->register_memory(params[k]));
    pmr.push_back(std::move(mr));
  }
  m.gradient(params, data, std::vector<size_t>{lo}, grads);  // sizes the gradient buffers
  for (auto& gk : grads) {
    GW_ASSIGN_OR_RETURN(auto mr, w->register_memory(gk));
    gmr.push_back(std::move(mr));
  }
  std::vector<size_t> rows(static_cast<size_t>(o.batch));
  std::vector<PsHandle> hs(keys.size());
  const Nanos tmo = Millis(o.timeout_ms);
  const auto t0 = Clock::now();
  Nanos evaluating{0};  // worker 0's evaluation time, left out of its clock
  auto since = [&] {
    return std::chrono::duration<double>(Clock::now() - t0 - evaluating).count();
  };
  for (int it = 0; it <= o.iters; ++it) {
    for (size_t k = 0; k < keys.size(); ++k) {
      GW_ASSIGN_OR_RETURN(hs[k], w->pull(keys[k].key, params[k], &pmr[k]));
    }
    for (auto h : hs) GW_RETURN_IF_ERROR(w->wait(h, tmo));
    if (idx == 0 && (it % o.eval_every == 0 || it == o.iters)) {
      Point p;
      p.iter = it;
      p.wall_s = since();
      const auto e0 = Clock::now();
      m.evaluate(params, eval, &p.loss, &p.acc);
      evaluating += Clock::now() - e0;
      out->series.pts.push_back(p);
    }
    if (it == o.iters) break;  // the last pull only reads the final model
    if (straggler) GW_RETURN_IF_ERROR(straggle(*w, g.transport(), Millis(straggler_ms)));
    for (size_t j = 0; j < rows.size(); ++j)
      rows[j] = lo + (static_cast<size_t>(it) * rows.size() + j) % (hi - lo);
    // The gradient buffers are registered: compute in place, then push from them.
    std::vector<std::vector<float>> tmp;
    m.gradient(params, data, rows, tmp);
    for (size_t k = 0; k < keys.size(); ++k)
      std::copy(tmp[k].begin(), tmp[k].end(), grads[k].begin());
    for (size_t k = 0; k < keys.size(); ++k) {
      GW_ASSIGN_OR_RETURN(hs[k], w->push(keys[k].key, grads[k], &gmr[k]));
    }
    for (auto h : hs) GW_RETURN_IF_ERROR(w->wait(h, tmo));
  }
  GW_RETURN_IF_ERROR(w->finish(tmo));
  const double mine = since();
  GW_RETURN_IF_ERROR(g.store().set(prefix + "/done/" + std::to_string(idx), std::to_string(mine)));
  if (idx != 0) return Status();
  // Worker 0 gathers the others' finishing times and the servers' staleness.
  for (int i = 0; i < nw; ++i) {
    GW_ASSIGN_OR_RETURN(std::string v, g.store().get(prefix + "/done/" + std::to_string(i), tmo));
    out->wall_s = std::max(out->wall_s, std::stod(v));
  }
  for (int s = 0; s < po.servers; ++s) {
    GW_ASSIGN_OR_RETURN(std::string v, g.store().get(prefix + "/stats/" + std::to_string(s), tmo));
    std::istringstream in(v);
    int64_t stale = 0;
    uint64_t deferred = 0;
    in >> stale >> deferred;
    out->max_stale = std::max(out->max_stale, stale);
    out->deferred += deferred;
  }
  return Status();
}

void print_table(const Options& o, int workers, const std::vector<RunResult>& runs) {
  std::printf(
      "\n# gw-ps-train: %s, %d server(s), %d worker(s), %s, %zu samples x %d dims, "
      "batch %d/worker, %d iterations, sgd lr %.3g momentum %.3g\n",
      o.transport.c_str(), o.servers, workers,
      o.hidden ? ("mlp(hidden " + std::to_string(o.hidden) + ")").c_str() : "logistic regression",
      o.samples, o.dim, o.batch, o.iters, o.lr, o.momentum);
  std::printf("%-26s %9s %10s %8s %16s %12s %10s %9s\n", "run", "wall_s", "final_loss", "acc",
              "t_to_target_s", "it_to_target", "max_stale", "deferred");
  for (const auto& r : runs) {
    const Point& last = r.series.pts.back();
    std::string tt = "-", it = "-";
    for (const auto& p : r.series.pts) {
      if (p.loss <= o.target) {
        tt = std::to_string(p.wall_s).substr(0, 6);
        it = std::to_string(p.iter);
        break;
      }
    }
    std::printf("%-26s %9.3f %10.4f %8.4f %16s %12s %10lld %9llu\n", r.series.label.c_str(),
                r.wall_s, last.loss, last.acc, tt.c_str(), it.c_str(),
                static_cast<long long>(r.max_stale), static_cast<unsigned long long>(r.deferred));
  }
  std::printf(
      "(target loss %.3g; loss/accuracy of worker 0's pulled model on 2048 held-out "
      "samples, its evaluation time left out of t_to_target; wall_s until the last "
      "worker finished)\n",
      o.target);
}

int run(const Options& o, const Launched& l) {
  const int workers = l.size - o.servers;
  if (workers < 1) {
    return fail(kApp, Status(Code::kInvalidArgument, std::to_string(l.size) +
                                                         " ranks leave no worker beside " +
                                                         std::to_string(o.servers) + " server(s)"));
  }
  const Data data = make_blobs(o.samples, o.dim, o.seed);
  const Data eval = make_blobs(2048, o.dim, o.seed + 1000);  // held out
  const Model model(o.dim, o.hidden);
  std::vector<RunResult> results;
  for (int straggle : o.straggler_ms) {
    for (const auto& mode : o.modes) {
      PsOptions po;
      po.servers = o.servers;
      po.mode = *parse_consistency(mode);
      po.staleness = o.staleness;
      po.timeout = Millis(o.timeout_ms);
      const std::string prefix = "ps-train/" + mode + "/" + std::to_string(straggle);
      auto g = make_group(l, o.transport, prefix, Millis(o.timeout_ms));
      if (!g.ok()) return fail(kApp, g.status());
      RunResult r;
      r.series.label = label_of(mode, o.staleness, straggle);
      Status st = l.rank < o.servers
                      ? run_server(**g, o, po, model, prefix)
                      : run_worker(**g, o, po, model, data, eval, straggle, prefix, &r);
      if (!st.ok()) return fail(kApp, st.with_context(r.series.label));
      g->reset();
      st = end_phase(l, prefix, Millis(o.timeout_ms));
      if (!st.ok()) return fail(kApp, st.with_context(r.series.label));
      if (l.rank == o.servers) {
        std::fprintf(stderr, "%s: %s done in %.2f s\n", kApp, r.series.label.c_str(), r.wall_s);
        results.push_back(std::move(r));
      }
    }
  }
  if (Status st = leave(l, Millis(o.timeout_ms)); !st.ok()) return fail(kApp, st);
  if (l.rank != o.servers) return 0;
  print_table(o, workers, results);
  std::vector<Series> series;
  for (auto& r : results) series.push_back(r.series);
  std::string title = std::string("gw-ps-train: ") + (o.hidden ? "MLP" : "logistic regression") +
                      ", " + std::to_string(o.servers) + " server(s), " + std::to_string(workers) +
                      " workers over " + o.transport;
  Status st = write_csv(o.csv, series);
  if (st.ok()) st = write_svg(o.svg, series, title);
  if (!st.ok()) return fail(kApp, st);
  std::printf("wrote %s and %s\n", o.csv.c_str(), o.svg.c_str());
  return 0;
}

}  // namespace
}  // namespace gw::psapp

int main(int argc, char** argv) {
  using gw::psapp::Options;
  Options o;
  CLI::App app{
      "gw-ps-train: logistic regression or a 2-layer MLP trained on the gradwire "
      "parameter server under BSP, ASP and SSP.\n"
      "  local:    gw-ps-train --ranks N --servers K [options]\n"
      "  launched: GW_RANK/GW_WORLD_SIZE/GW_MASTER_ADDR/GW_MASTER_PORT (or torchrun, "
      "Open MPI, Slurm variables); ranks 0..K-1 serve",
      "gw-ps-train"};
  app.add_option("--ranks", o.ranks, "start this many local processes (servers + workers)")
      ->check(CLI::Range(2, 64));
  app.add_option("--servers", o.servers, "server ranks (0..K-1)")->capture_default_str();
  app.add_option("--modes", o.modes, "consistency modes to run, in order")
      ->delimiter(',')
      ->check(CLI::IsMember({"bsp", "asp", "ssp"}))
      ->capture_default_str();
  app.add_option("--staleness", o.staleness, "SSP bound s")->capture_default_str();
  app.add_option("--straggler-ms", o.straggler_ms,
                 "delay of the last worker per iteration; a list runs each value")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--iters", o.iters, "iterations per worker")->capture_default_str();
  app.add_option("--batch", o.batch, "minibatch per worker and iteration")->capture_default_str();
  app.add_option("--samples", o.samples, "data set size")->capture_default_str();
  app.add_option("--dim", o.dim, "features")->capture_default_str();
  app.add_option("--hidden", o.hidden, "MLP hidden units (0: logistic regression)")
      ->capture_default_str();
  app.add_option("--lr", o.lr, "server SGD learning rate")->capture_default_str();
  app.add_option("--momentum", o.momentum, "server SGD momentum")->capture_default_str();
  app.add_option("--target-loss", o.target, "report time to reach this loss")
      ->capture_default_str();
  app.add_option("--eval-every", o.eval_every, "worker 0 evaluates every N iterations")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", o.seed, "data set seed")->capture_default_str();
  app.add_option("-t,--transport", o.transport, "transport spec")->capture_default_str();
  app.add_option("--csv", o.csv, "loss curves (CSV)")->capture_default_str();
  app.add_option("--svg", o.svg, "loss against wall time (SVG)")->capture_default_str();
  app.add_option("--timeout-ms", o.timeout_ms, "setup and per-wait timeout")->capture_default_str();
  app.add_flag("--threads", o.threads,
               "with --ranks: run the ranks as threads of this process (in-process store), as "
               "transports that connect only within a process need (dpdk:ring=NAME)");
  CLI11_PARSE(app, argc, argv);
  if (o.batch < 1 || o.iters < 1 || o.dim < 1 || o.samples < 2) {
    std::fprintf(stderr, "gw-ps-train: --batch, --iters, --dim must be >= 1, --samples >= 2\n");
    return 2;
  }
  return gw::psapp::start("gw-ps-train", o.ranks, o.threads, argv, gw::Millis(o.timeout_ms),
                          [&](const gw::psapp::Launched& l) { return gw::psapp::run(o, l); });
}
