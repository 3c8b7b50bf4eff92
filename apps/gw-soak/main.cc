// gw-soak: random collectives (every kind, dtype, op, algorithm, in place or not, 1 element to
// --max-count) and parameter-server rounds, every element of every result checked on every rank
// against soak_ops' reference. usertools/gw-soak.py runs it for a long time over tcp and dpdk
// with injected faults and killed or stopped ranks.
// Exit codes: 0 all results right; 3 a wrong result (the first is printed); 1 an error; 2 usage.
// A failed rank prints one line "gw-soak: rank R: <what>: <status> [culprit: rank V]" (or
// "[culprit: unknown]"): V is the error's structured Status::rank(), which gw-soak.py counts.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gw_coll.h"
#include "gw_ps.h"
#include "ps_launch.h"
#include "soak_ops.h"

namespace gw::soak {
namespace {

using psapp::Launched;

int fail(const Launched& l, const std::string& what, const Status& st) {
  std::string culprit = st.rank() >= 0 ? "rank " + std::to_string(st.rank()) : "unknown";
  std::fprintf(stderr, "gw-soak: rank %d: %s: %s [culprit: %s]\n", l.rank, what.c_str(),
               st.to_string().c_str(), culprit.c_str());
  return 1;
}

struct Options {
  int ranks = 0;
  bool threads = false;
  std::string transport = "tcp:iface=lo";
  uint64_t seed = 1;
  int ops = 200;
  size_t max_count = 1 << 18;
  int servers = 0;
  int ps_rounds = 20;
  int timeout_ms = 20000;
  int gaps = 0;  // compute gaps: a rank makes no call for a while before some ops
  int gap_min_ms = 100, gap_max_ms = 0;  // each lasts gap_min_ms .. gap_max_ms
};

/// Whether this rank computes before step `i` of a phase of `steps` steps (0: the collectives,
/// 1: the PS rounds), and how long: the same plan on every rank; ranks [first, first + count)
/// may compute.
Nanos compute_gap(const Options& o, uint64_t phase, int steps, int i, int rank, int first,
                  int count) {
  if (o.gaps <= 0 || o.gap_max_ms <= 0 || count <= 0) return Nanos(0);
  const int lo = std::min(o.gap_min_ms, o.gap_max_ms);
  std::mt19937_64 rng(o.seed * 104729 + 17 + phase);
  for (int k = 0; k < o.gaps; ++k) {
    const int at = static_cast<int>(rng() % static_cast<uint64_t>(std::max(1, steps)));
    const int who = first + static_cast<int>(rng() % static_cast<uint64_t>(count));
    const int64_t ms =
        lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(o.gap_max_ms - lo + 1));
    if (at == i && who == rank) return Millis(ms);
  }
  return Nanos(0);
}

/// A trainer's data loading or checkpoint: no call while the transport serves the peers.
void maybe_compute(const Options& o, uint64_t phase, int steps, int i, const Launched& l,
                   int first) {
  const Nanos gap = compute_gap(o, phase, steps, i, l.rank, first, l.size - first);
  if (gap.count() == 0) return;
  std::printf("gw-soak: rank %d computes %lld ms before %s %d (no gradwire call)\n", l.rank,
              static_cast<long long>(gap.count() / 1'000'000), phase == 0 ? "op" : "PS round", i);
  std::fflush(stdout);
  std::this_thread::sleep_for(gap);
}

/// The transport spec of a phase: "{phase}" becomes its name, so that each phase may have its
/// own memif socket (a pair of processes reopening one socket raced once in three under load).
std::string phase_spec(const Options& o, const std::string& phase) {
  std::string s = o.transport;
  for (size_t at; (at = s.find("{phase}")) != std::string::npos;) s.replace(at, 7, phase);
  return s;
}

/// First wrong element, if any.
struct Wrong {
  bool any = false;
  std::string what;
};

class Runner {
 public:
  Runner(Communicator& c, const Options& o, int rank, int n) : c_(c), o_(o), r_(rank), n_(n) {}

  Status run(uint64_t index, const Op& op, Wrong* w, uint64_t* checked) {
    op_ = &op;
    w_ = w;
    checked_ = checked;
    const size_t es = dtype_size(op.dt);
    const size_t big = op.count * static_cast<size_t>(n_) + 64;
    a_.assign(big * es, 0x5A);
    b_.assign(big * es, 0xA5);
    CallOptions call;
    call.algo = op.algo;
    switch (op.kind) {
      case Kind::kAllreduce: {
        fill(a_.data(), op.count, r_, 0);
        void* out = op.in_place ? a_.data() : b_.data();
        GW_RETURN_IF_ERROR(c_.allreduce(a_.data(), out, op.count, op.dt, op.op, call));
        expect_reduced(out, op.count, 0);
        return Status();
      }
      case Kind::kBucket: {
        const size_t counts[3] = {op.count, std::max<size_t>(1, op.count / 3), 7};
        TensorRef t[3];
        size_t off = 0;
        for (int k = 0; k < 3; ++k) {
          uint8_t* in = a_.data() + off * es;
          fill(in, counts[k], r_, off);
          t[k] = {in, op.in_place ? in : b_.data() + off * es, counts[k]};
          off += counts[k];
        }
        if (off > big) return Status(Code::kInternal, "bucket larger than its buffer");
        GW_RETURN_IF_ERROR(c_.allreduce(std::span<const TensorRef>(t, 3), op.dt, op.op));
        off = 0;
        for (int k = 0; k < 3; ++k) {
          expect_reduced(t[k].recv, counts[k], off);
          off += counts[k];
        }
        return Status();
      }
      case Kind::kReduceScatter: {
        fill(a_.data(), op.count * n_, r_, 0);
        uint8_t* out = op.in_place ? a_.data() + r_ * op.count * es : b_.data();
        GW_RETURN_IF_ERROR(c_.reduce_scatter(a_.data(), out, op.count, op.dt, op.op));
        expect_reduced(out, op.count, r_ * op.count);
        return Status();
      }
      case Kind::kAllgather: {
        uint8_t* in = op.in_place ? b_.data() + r_ * op.count * es : a_.data();
        fill(in, op.count, r_, 0);
        GW_RETURN_IF_ERROR(c_.allgather(in, b_.data(), op.count, op.dt));
        for (int src = 0; src < n_; ++src) expect_input(b_.data() + src * op.count * es, src);
        return Status();
      }
      case Kind::kBroadcast:
        if (r_ == op.root) fill(a_.data(), op.count, r_, 0);
        GW_RETURN_IF_ERROR(c_.broadcast(a_.data(), op.count, op.dt, op.root));
        expect_input(a_.data(), op.root);
        return Status();
      case Kind::kBarrier:
        return c_.barrier();
      case Kind::kSendRecv: {
        const int to = (r_ + op.root) % n_, from = (r_ - op.root + n_) % n_;
        const auto tag = static_cast<uint32_t>(index & 0x7fffffff);
        fill(a_.data(), op.count, r_, 0);
        size_t got = 0;
        GW_ASSIGN_OR_RETURN(auto rh,
                            c_.recv_async(b_.data(), op.count * es, from, tag, nullptr, &got));
        GW_ASSIGN_OR_RETURN(auto sh, c_.send_async(a_.data(), op.count * es, to, tag));
        GW_RETURN_IF_ERROR(c_.wait(rh, Millis(o_.timeout_ms)));
        GW_RETURN_IF_ERROR(c_.wait(sh, Millis(o_.timeout_ms)));
        if (got != op.count * es) {
          mark("received " + std::to_string(got) + " bytes from rank " + std::to_string(from) +
               ", want " + std::to_string(op.count * es));
          return Status();
        }
        expect_input(b_.data(), from);
        return Status();
      }
    }
    return Status();
  }

 private:
  // Elements base..base+count of `rank`'s input.
  void fill(void* p, size_t count, int rank, size_t base) {
    const size_t es = dtype_size(op_->dt);
    for (size_t i = 0; i < count; ++i)
      store(op_->dt, static_cast<double>(input(*op_, rank, base + i)),
            static_cast<uint8_t*>(p) + i * es);
  }

  void expect_reduced(const void* p, size_t count, size_t base) {
    const size_t es = dtype_size(op_->dt);
    for (size_t i = 0; i < count && !w_->any; ++i) {
      const double got = load(op_->dt, static_cast<const uint8_t*>(p) + i * es);
      const double want = reduced(*op_, n_, base + i);
      if (!same(*op_, got, want)) mark_element(base + i, got, want);
    }
    *checked_ += count;
  }

  void expect_input(const void* p, int src) {
    const size_t es = dtype_size(op_->dt);
    for (size_t i = 0; i < op_->count && !w_->any; ++i) {
      const double got = load(op_->dt, static_cast<const uint8_t*>(p) + i * es);
      const double want = static_cast<double>(input(*op_, src, i));
      if (got != want) mark_element(i, got, want, src);
    }
    *checked_ += op_->count;
  }

  void mark_element(size_t i, double got, double want, int src = -1) {
    char b[160];
    std::snprintf(b, sizeof b, "element %zu%s%s: got %g, want %g", i, src >= 0 ? " from rank " : "",
                  src >= 0 ? std::to_string(src).c_str() : "", got, want);
    mark(b);
  }

  void mark(const std::string& what) {
    if (w_->any) return;
    w_->any = true;
    w_->what = what;
  }

  Communicator& c_;
  const Options& o_;
  const int r_, n_;
  const Op* op_ = nullptr;
  Wrong* w_ = nullptr;
  uint64_t* checked_ = nullptr;
  std::vector<uint8_t> a_, b_;
};

int coll_phase(const Options& o, const Launched& l, uint64_t* checked) {
  const Nanos tmo = Millis(o.timeout_ms);
  auto g = psapp::make_group(l, phase_spec(o, "coll"), "soak/coll", tmo);
  if (!g.ok()) return fail(l, "set-up", g.status());
  CommOptions co;
  co.timeout = tmo;
  auto c = Communicator::create(**g, co);
  if (!c.ok()) return fail(l, "communicator", c.status());
  Runner run(**c, o, l.rank, l.size);
  for (int i = 0; i < o.ops; ++i) {
    maybe_compute(o, 0, o.ops, i, l, 0);
    const Op op = make_op(o.seed, static_cast<uint64_t>(i), l.size, o.max_count);
    Wrong w;
    Status st = run.run(static_cast<uint64_t>(i), op, &w, checked);
    if (!st.ok()) {
      return fail(l, "op " + std::to_string(i) + " (" + describe(op) + ")", st);
    }
    if (w.any) {
      std::fprintf(stderr, "gw-soak: rank %d: WRONG RESULT: op %d (%s, seed %llu): %s\n", l.rank, i,
                   describe(op).c_str(), static_cast<unsigned long long>(o.seed), w.what.c_str());
      return 3;
    }
  }
  c->reset();
  g->reset();
  Status st = psapp::end_phase(l, "soak/coll", tmo);
  return st.ok() ? 0 : fail(l, "end of the collectives", st);
}

float grad_value(int worker, int round, uint64_t key, size_t i) {
  return static_cast<float>(static_cast<int64_t>((worker + 1) * (round + 1) + i + key) % 7 - 3);
}

int ps_phase(const Options& o, const Launched& l, uint64_t* checked) {
  const Nanos tmo = Millis(o.timeout_ms);
  std::mt19937_64 rng(o.seed * 7919 + 1);
  std::vector<KeySpec> keys;
  for (uint64_t k = 0; k < 3; ++k) keys.push_back({k, 1 + rng() % o.max_count});
  PsOptions po;
  po.servers = o.servers;
  po.mode = Consistency::kBsp;
  po.timeout = tmo;
  auto g = psapp::make_group(l, phase_spec(o, "ps"), "soak/ps", tmo);
  if (!g.ok()) return fail(l, "PS set-up", g.status());
  Status st;
  if (l.rank < o.servers) {
    auto s = PsServer::create(**g, keys, po, make_sum_updater());
    st = s.ok() ? (*s)->serve(tmo * static_cast<int64_t>(o.ps_rounds + 2)) : s.status();
  } else {
    auto w = PsWorker::create(**g, keys, po);
    if (!w.ok()) return fail(l, "PS worker", w.status());
    const int workers = (*w)->workers();
    for (int t = 0; t < o.ps_rounds && st.ok(); ++t) {
      maybe_compute(o, 1, o.ps_rounds, t, l, o.servers);
      for (const KeySpec& k : keys) {
        std::vector<float> grad(k.count), par(k.count, -1000.0f);
        for (size_t i = 0; i < k.count; ++i)
          grad[i] = grad_value((*w)->worker_index(), t, k.key, i);
        auto h = (*w)->push(k.key, grad);
        st = h.ok() ? (*w)->wait(*h, tmo) : h.status();
        if (st.ok()) {
          h = (*w)->pull(k.key, par);
          st = h.ok() ? (*w)->wait(*h, tmo) : h.status();
        }
        if (!st.ok()) break;
        for (size_t i = 0; i < k.count; ++i) {
          float want = 0;
          for (int q = 0; q < workers; ++q) want += grad_value(q, t, k.key, i);
          if (par[i] != want) {
            std::fprintf(stderr,
                         "gw-soak: rank %d: WRONG RESULT: PS round %d key %llu element "
                         "%zu: got %g, want %g\n",
                         l.rank, t, static_cast<unsigned long long>(k.key), i, par[i], want);
            return 3;
          }
        }
        *checked += k.count;
      }
    }
    if (st.ok()) st = (*w)->finish(tmo);
  }
  if (!st.ok()) return fail(l, "PS phase", st);
  g->reset();
  st = psapp::end_phase(l, "soak/ps", tmo);
  return st.ok() ? 0 : fail(l, "end of the PS rounds", st);
}

int run(const Options& o, const Launched& l) {
  uint64_t checked = 0;
  if (int rc = coll_phase(o, l, &checked); rc != 0) return rc;
  if (o.servers > 0 && l.size > o.servers)
    if (int rc = ps_phase(o, l, &checked); rc != 0) return rc;
  if (Status st = psapp::leave(l, Millis(o.timeout_ms)); !st.ok())
    return fail(l, "end of the job", st);
  std::printf("gw-soak: rank %d OK: %d collectives%s, %llu elements checked\n", l.rank, o.ops,
              o.servers > 0 ? " + PS rounds" : "", static_cast<unsigned long long>(checked));
  return 0;
}

}  // namespace
}  // namespace gw::soak

int main(int argc, char** argv) {
  gw::soak::Options o;
  CLI::App app{
      "gw-soak: random collectives and PS rounds, every result checked.\n"
      "  local:    gw-soak --ranks N [options]   launched: GW_RANK/... variables",
      "gw-soak"};
  app.add_option("--ranks", o.ranks, "start this many local processes")->check(CLI::Range(2, 64));
  app.add_flag("--threads", o.threads, "with --ranks: ranks as threads (dpdk:ring=NAME)");
  app.add_option("-t,--transport", o.transport,
                 "transport spec; {phase} becomes coll or ps (e.g. a memif socket per phase)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "schedule seed (the same on every rank)")->capture_default_str();
  app.add_option("--ops", o.ops, "collectives to run")->capture_default_str();
  app.add_option("--max-count", o.max_count, "largest element count")->capture_default_str();
  app.add_option("--servers", o.servers, "PS servers (0: no PS phase)")->capture_default_str();
  app.add_option("--ps-rounds", o.ps_rounds, "BSP rounds per key")->capture_default_str();
  app.add_option("--timeout-ms", o.timeout_ms, "timeout of every wait")->capture_default_str();
  app.add_option("--gaps", o.gaps,
                 "compute gaps: before this many ops (and as many PS rounds) one rank sleeps")
      ->capture_default_str();
  app.add_option("--gap-min-ms", o.gap_min_ms, "each gap lasts at least this long")
      ->capture_default_str();
  app.add_option("--gap-max-ms", o.gap_max_ms, "and at most this long")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return gw::psapp::start("gw-soak", o.ranks, o.threads, argv, gw::Millis(o.timeout_ms),
                          [&](const gw::psapp::Launched& l) { return gw::soak::run(o, l); });
}
