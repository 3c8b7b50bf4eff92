// Client and server roles: the phase protocol around the timed loops.
//   client: Hello -> Ready; per size: [warm-up phase] timed phase; Quit -> Bye.
//   phase:  client pre-posts its receives, sends Plan; server posts, answers Ready; the client
//           starts its clock on Ready and stops it on the server's Done (which carries the
//           server's --check errors and receive-side peak).
#include "perf_run.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "perf_report.h"
#include "perf_session.h"

namespace gw::perf {

namespace {

constexpr uint64_t kWarmupBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxDurationIters = 50'000'000;  // bounds the timestamp arrays of -D

class Client {
 public:
  Client(Session& s, const Options& o) : s_(s), o_(o) {}

  Result<BwResult> bw(uint64_t size, uint64_t iters);
  Result<LatResult> lat(uint64_t size, uint64_t iters);
  /// Warm-up (untimed) and timed phases of one size, printed.
  Result<uint64_t> run_size(uint64_t size);

 private:
  Phase base(uint64_t size) {
    Phase p;
    p.seq = ++seq_;
    p.size = size;
    p.check = o_.check;
    p.send_dir = 1;
    p.recv_dir = 0;
    return p;
  }
  Status start(const Phase& p, uint64_t iters, uint32_t flags);

  Session& s_;
  const Options& o_;
  uint64_t seq_ = 0;
  std::vector<uint64_t> times_;  // bw -b receive timestamps / lat round trips; reused
};

Status Client::start(const Phase& p, uint64_t iters, uint32_t flags) {
  if (o_.check) flags |= kFlagCheck;
  Ctrl plan{.type = CtrlType::kPlan,
            .size = p.size,
            .iters = iters,
            .seq = p.seq,
            .flags = flags,
            .depth = p.depth};
  GW_RETURN_IF_ERROR(s_.send_ctrl(plan));
  return s_.recv_ctrl(CtrlType::kReady).status();
}

Result<BwResult> Client::bw(uint64_t size, uint64_t iters) {
  Phase p = base(size);
  p.slots = s_.slots_for(size);
  p.depth = o_.check ? p.slots : s_.depth();
  p.rx_depth = o_.check ? p.slots : s_.rx_depth();
  p.recv_total = o_.bidir ? iters : 0;
  if (o_.bidir) {
    if (times_.size() < iters) times_.resize(iters);
    p.recv_times = times_.data();
  }
  s_.begin(p);
  GW_RETURN_IF_ERROR(s_.fill());  // our receives are posted before the server may send
  GW_RETURN_IF_ERROR(start(s_.phase(), iters, o_.bidir ? kFlagBidir : 0));
  const uint64_t t0 = now_ns();
  s_.phase().send_total = iters;
  GW_RETURN_IF_ERROR(s_.fill());
  while (!s_.phase_done()) GW_RETURN_IF_ERROR(s_.pump());
  GW_ASSIGN_OR_RETURN(Ctrl done, s_.recv_ctrl(CtrlType::kDone));
  const double secs = static_cast<double>(now_ns() - t0) * 1e-9;

  BwResult r;
  r.size = size;
  r.iters = iters;
  r.depth = s_.phase().depth;
  const double msgs = static_cast<double>(iters) * (o_.bidir ? 2 : 1);
  r.avg_bps = msgs * static_cast<double>(size) / secs;
  r.msg_rate = msgs / secs;
  r.peak_bps = done.recv_peak;
  if (o_.bidir) r.peak_bps += peak_rate({times_.data(), iters}, r.depth, size);
  // Too few batches to find a window: the peak is at least the average.
  r.peak_bps = std::max(r.peak_bps, r.avg_bps);
  r.errors = s_.phase().errors + done.errors;
  return r;
}

Result<LatResult> Client::lat(uint64_t size, uint64_t iters) {
  Phase p = base(size);
  p.auto_post = false;
  p.send_total = p.recv_total = iters;
  if (times_.size() < iters) times_.resize(iters);
  s_.begin(p);
  GW_RETURN_IF_ERROR(start(s_.phase(), iters, kFlagLat));
  const Phase& ph = s_.phase();
  for (uint64_t i = 0; i < iters; ++i) {
    GW_RETURN_IF_ERROR(s_.post_recv_one(i));
    const uint64_t t0 = now_ns();
    GW_RETURN_IF_ERROR(s_.post_send_one(i));
    while (ph.recv_done <= i) GW_RETURN_IF_ERROR(s_.pump());
    times_[i] = now_ns() - t0;
  }
  while (!s_.phase_done()) GW_RETURN_IF_ERROR(s_.pump());
  GW_ASSIGN_OR_RETURN(Ctrl done, s_.recv_ctrl(CtrlType::kDone));
  LatResult r = lat_stats({times_.data(), iters}, size);
  r.errors = ph.errors + done.errors;
  return r;
}

Result<uint64_t> Client::run_size(uint64_t size) {
  const bool is_bw = o_.test == Test::kBw;
  uint64_t warmup = o_.warmup;
  if (warmup == 0) {
    uint64_t cap = is_bw ? 2 * uint64_t{s_.depth()} : 100;
    warmup = std::clamp<uint64_t>(kWarmupBytes / std::max<uint64_t>(size, 1), 4, cap);
  }
  uint64_t errors = 0;
  const uint64_t w0 = now_ns();
  if (is_bw) {
    GW_ASSIGN_OR_RETURN(BwResult w, bw(size, warmup));
    errors += w.errors;
  } else {
    GW_ASSIGN_OR_RETURN(LatResult w, lat(size, warmup));
    errors += w.errors;
  }
  uint64_t iters = o_.iters;
  if (o_.duration_s > 0) {
    // Iterations for about -D seconds at the warm-up's pace.
    double per_iter = static_cast<double>(now_ns() - w0) * 1e-9 / static_cast<double>(warmup);
    iters =
        std::clamp<uint64_t>(static_cast<uint64_t>(o_.duration_s / per_iter), 1, kMaxDurationIters);
  }
  if (is_bw) {
    GW_ASSIGN_OR_RETURN(BwResult r, bw(size, iters));
    print_bw(o_, r);
    errors += r.errors;
  } else {
    GW_ASSIGN_OR_RETURN(LatResult r, lat(size, iters));
    print_lat(o_, r);
    errors += r.errors;
  }
  return errors;
}

int report_failure(const Status& st) {
  std::fflush(stdout);
  std::fprintf(stderr, "gw-perf: %s\n", st.to_string().c_str());
  return 1;
}

}  // namespace

int run_client(Group& group, const Options& opt) {
  const uint64_t max = max_size(opt);
  auto s = Session::create(group, opt, max, opt.tx_depth, opt.rx_depth, opt.check, opt.buffers);
  if (!s.ok()) return report_failure(s.status());
  Session& session = **s;
  Ctrl hello{.type = CtrlType::kHello,
             .size = max,
             .flags = opt.check ? kFlagCheck : 0u,
             .depth = opt.tx_depth,
             .rx_depth = opt.rx_depth,
             .buffers = opt.buffers};
  Status st = session.send_ctrl(hello);
  if (st.ok()) st = session.recv_ctrl(CtrlType::kReady).status();
  if (!st.ok()) return report_failure(st);

  print_header(opt, session.properties(), session.depth(), session.rx_depth());
  Client client(session, opt);
  uint64_t errors = 0;
  for (uint64_t size : opt.sizes) {
    auto e = client.run_size(size);
    if (!e.ok()) return report_failure(e.status());
    errors += *e;
  }
  print_footer(opt);
  if (opt.stats) print_stats("client", group.transport().stats());
  st = session.send_ctrl(Ctrl{.type = CtrlType::kQuit});
  if (st.ok()) st = session.recv_ctrl(CtrlType::kBye).status();
  if (!st.ok()) return report_failure(st);
  if (errors != 0) {
    std::fprintf(stderr, "gw-perf: --check FAILED: %" PRIu64 " bytes received wrong\n", errors);
    return 3;
  }
  return 0;
}

int run_server(Group& group, const Options& opt) {
  auto s = Session::create_control(group, opt);
  if (!s.ok()) return report_failure(s.status());
  Session& session = **s;
  auto hello = session.recv_ctrl(CtrlType::kHello);
  if (!hello.ok()) return report_failure(hello.status());
  const bool check = (hello->flags & kFlagCheck) != 0;
  Status st = session.create_data(hello->size, hello->depth, hello->rx_depth, check,
                                  std::max<uint32_t>(1, hello->buffers));
  if (st.ok()) st = session.send_ctrl(Ctrl{.type = CtrlType::kReady});
  if (!st.ok()) return report_failure(st);

  std::vector<uint64_t> times;
  uint64_t errors = 0, phases = 0;
  for (;;) {
    auto c = session.recv_ctrl(CtrlType::kPlan, CtrlType::kQuit);
    if (!c.ok()) return report_failure(c.status());
    if (c->type == CtrlType::kQuit) break;
    const bool lat = (c->flags & kFlagLat) != 0;
    Phase p;
    p.seq = c->seq;
    p.size = c->size;
    p.check = check;
    p.slots = session.slots_for(c->size);
    p.depth = lat ? 1 : c->depth;
    p.rx_depth = lat ? 1 : session.rx_depth();
    p.send_dir = 0;
    p.recv_dir = 1;
    p.recv_total = c->iters;
    p.send_total = lat || (c->flags & kFlagBidir) ? c->iters : 0;
    p.echo = lat;
    if (!lat) {
      if (times.size() < c->iters) times.resize(c->iters);
      p.recv_times = times.data();
    }
    session.begin(p);
    st = session.fill();
    if (st.ok()) st = session.send_ctrl(Ctrl{.type = CtrlType::kReady});
    while (st.ok() && !session.phase_done()) st = session.pump();
    if (!st.ok()) return report_failure(st);
    const Phase& done = session.phase();
    Ctrl reply{.type = CtrlType::kDone, .errors = done.errors};
    if (!lat) reply.recv_peak = peak_rate({times.data(), c->iters}, done.depth, c->size);
    st = session.send_ctrl(reply);
    if (!st.ok()) return report_failure(st);
    errors += done.errors;
    ++phases;
  }
  if (opt.stats) print_stats("server", group.transport().stats());
  st = session.send_ctrl(Ctrl{.type = CtrlType::kBye});
  if (st.ok()) st = session.flush_ctrl();
  if (!st.ok()) return report_failure(st);
  if (opt.ranks == 0) {
    std::fprintf(stderr,
                 "gw-perf server: %" PRIu64 " phases served, %" PRIu64 " bytes received wrong\n",
                 phases, errors);
  }
  return errors != 0 ? 3 : 0;
}

}  // namespace gw::perf
