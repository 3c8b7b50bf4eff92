// gw-fail-probe: one rank of a failure trial (usertools/gw-fail-trials.py). Joins the job the
// launcher variables describe (GW_RANK, GW_WORLD_SIZE, GW_MASTER_ADDR, GW_MASTER_PORT), runs
// allreduces until one fails, prints what it learned and stays alive (as a trainer that
// catches the error does) until it is killed or `--linger-s` passes.
// Usage: gw-fail-probe [--bytes N] [--timeout-ms T] [--linger-s S] [--transport SPEC]
//          [--gap-ms G] [--pause-rank R --pause-at K --pause-s S]
// --gap-ms: "computes" G ms between allreduces; --pause-*: rank R computes S s before its
// K-th allreduce (the others wait in it: tests/coll/health_live.py).
// Prints "ready <rank> job=<Group::job_id hex>" after the first allreduce, then on the error
// one line:
// "error rank=<r> t_ns=<unix ns> code=<Code> culprit=<Status::rank()> msg=<text>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gw_coll.h"
#include "gw_group.h"
#include "gw_store.h"

namespace {

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int fail(const gw::Status& st) {
  std::fprintf(stderr, "gw-fail-probe: %s\n", st.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 16u << 20;
  int64_t timeout_ms = 60000, linger_s = 30, gap_ms = 0, pause_rank = -1, pause_at = 0, pause_s = 0;
  std::string spec = "tcp:iface=lo";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::strtoull(argv[i + 1], nullptr, 0);
    else if (!std::strcmp(argv[i], "--timeout-ms"))
      timeout_ms = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--linger-s"))
      linger_s = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--transport"))
      spec = argv[i + 1];
    else if (!std::strcmp(argv[i], "--gap-ms"))
      gap_ms = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--pause-rank"))
      pause_rank = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--pause-at"))
      pause_at = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--pause-s"))
      pause_s = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "gw-fail-probe: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  auto info = gw::discover_launch();
  if (!info.ok()) return fail(info.status());
  auto store = gw::store_for_launch(*info, gw::Millis(30000));
  if (!store.ok()) return fail(store.status());
  auto t = gw::Transport::open(spec);
  if (!t.ok()) return fail(t.status());
  auto g = gw::Group::create(*store, std::move(*t), info->rank, info->world_size, gw::Millis(30000),
                             "probe");
  if (!g.ok()) return fail(g.status());
  gw::CommOptions o;
  o.timeout = gw::Millis(timeout_ms);
  auto c = gw::Communicator::create(**g, o);
  if (!c.ok()) return fail(c.status());
  std::vector<float> in(bytes / sizeof(float), 1.f), out(in.size());
  bool ready = false;
  gw::Status st;
  for (int64_t k = 1; st.ok(); ++k) {
    if (k == pause_at && info->rank == pause_rank)
      std::this_thread::sleep_for(std::chrono::seconds(pause_s));
    if (gap_ms > 0 && k > 1) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    st = (*c)->allreduce(in.data(), out.data(), in.size(), gw::DataType::kFloat32,
                         gw::ReduceOp::kSum);
    if (st.ok() && !ready) {
      ready = true;
      std::printf("ready %d job=%016llx\n", info->rank,
                  static_cast<unsigned long long>((*g)->job_id()));
      std::fflush(stdout);
    }
  }
  std::string msg(st.message());
  for (char& ch : msg)
    if (ch == '\n') ch = ' ';
  std::printf("error rank=%d t_ns=%lld code=%s culprit=%d msg=%s\n", info->rank,
              static_cast<long long>(unix_ns()), gw::code_name(st.code()), st.rank(), msg.c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(linger_s));  // alive, communicator kept
  return 0;
}
