// gw-shrink-probe: one rank of a shrink trial (tests/coll/shrink_kill.py). Joins the job the
// launcher variables describe (GW_RANK, GW_WORLD_SIZE, GW_MASTER_*; or a file store with
// --store-dir), runs `--iters` allreduces (float sum, every element checked against the sum
// over the ranks still in), and when a call fails shrinks the communicator and goes on: the
// survivors agree on the next step (allreduce MIN) and redo it.
// Usage: gw-shrink-probe [--count N] [--iters K] [--transport SPEC] [--store-dir DIR]
//          [--shrink-at K --exclude R] [--die-in-shrink R] [--gap-ms G] [--reshrink-every K]
// --shrink-at K --exclude R: rank 0 shrinks at step K, naming R (alive: it must be excluded
// on every rank). --die-in-shrink R: rank R kills itself 1 ms into its first shrink.
// --reshrink-every K: rank 0 shrinks (excluding nobody) every K steps, for the leak check.
// --regrow: after each shrink the survivors grow back to the world size under the name
// "regrow/<n>" (n counts grows); a replacement runs with --join regrow/<n> --member-id M
// (its data's id; the original ranks are 0..world-1) and --grows n+1. --stop-file F: the
// ranks stop together at the first multiple of 10 steps after F exists (rank 0 looks).
// After a grow or join: "grown size=<n> ms=<t> members=<ids>" (t: grow + agreement).
// --reinit 1 (the baseline of the cost table): on a failure the survivors tear everything
// down and rendezvous again (new transport, Group::create under a new prefix, first
// collective) instead of shrinking; they print "reinit size=<n> ms=<t>".
// Prints "ready <rank>", "step <k>" every 10 steps, "failed step=<k> code=<c> culprit=<r>",
// "shrunk size=<n> rank=<r> ms=<t> gone=<orig ranks> fds=<n> threads=<n> rss_kb=<n> heap_kb=<n>",
// "excluded", and at the end "done steps=<k> size=<n> members=<orig ranks> wrong=0".
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
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

int fail(const gw::Status& st) {
  std::fprintf(stderr, "gw-shrink-probe: %s\n", st.to_string().c_str());
  return 1;
}

// Rank r's element i at step k: exact in float32 for these sizes.
float input(int r, int64_t k, size_t i) {
  return static_cast<float>((r + 1) * 1000 + (k % 97) * 3 + static_cast<int64_t>(i % 251));
}

// Open descriptors, threads, resident memory and heap bytes in use (the leak check: RSS alone
// moves with malloc's arenas settling; the heap in use does not).
void usage(long* fds, long* threads, long* rss_kb, long* heap_kb) {
  *fds = *threads = *rss_kb = -1;
  const struct mallinfo2 mi = ::mallinfo2();
  *heap_kb = static_cast<long>((mi.uordblks + mi.hblkhd) / 1024);
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
      if (!std::strncmp(line, "Threads:", 8)) *threads = std::atol(line + 8);
      if (!std::strncmp(line, "VmRSS:", 6)) *rss_kb = std::atol(line + 6);
    }
    std::fclose(f);
  }
  *fds = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++*fds;
    ::closedir(d);
  }
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s.empty() ? "-" : s;
}

}  // namespace

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main(int argc, char** argv) {
  std::unique_ptr<gw::Group> group_keep;  // the created group: after every communicator
  size_t count = 1 << 18;
  int64_t iters = 100, shrink_at = -1, exclude = -1, die_in_shrink = -1, gap_ms = 0, every = 0;
  std::string spec = "tcp:iface=lo", store_dir, join_name, stop_file;
  int64_t member_id = -1, grows = 0;
  bool regrow = false, reinit = false;
  int reinits = 0;
  std::shared_ptr<gw::Store> job_store;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* k = argv[i];
    const char* v = argv[i + 1];
    if (!std::strcmp(k, "--count"))
      count = std::strtoull(v, nullptr, 0);
    else if (!std::strcmp(k, "--iters"))
      iters = std::atoll(v);
    else if (!std::strcmp(k, "--transport"))
      spec = v;
    else if (!std::strcmp(k, "--store-dir"))
      store_dir = v;
    else if (!std::strcmp(k, "--shrink-at"))
      shrink_at = std::atoll(v);
    else if (!std::strcmp(k, "--exclude"))
      exclude = std::atoll(v);
    else if (!std::strcmp(k, "--die-in-shrink"))
      die_in_shrink = std::atoll(v);
    else if (!std::strcmp(k, "--join"))
      join_name = v;
    else if (!std::strcmp(k, "--member-id"))
      member_id = std::atoll(v);
    else if (!std::strcmp(k, "--grows"))
      grows = std::atoll(v);
    else if (!std::strcmp(k, "--stop-file"))
      stop_file = v;
    else if (!std::strcmp(k, "--reinit"))
      reinit = std::atoll(v) != 0;
    else if (!std::strcmp(k, "--regrow"))
      regrow = std::atoll(v) != 0;
    else if (!std::strcmp(k, "--reshrink-every"))
      every = std::atoll(v);
    else if (!std::strcmp(k, "--gap-ms"))
      gap_ms = std::atoll(v);
    else {
      std::fprintf(stderr, "gw-shrink-probe: unknown option %s\n", k);
      return 2;
    }
  }
  gw::CommOptions o;
  o.timeout = gw::Millis(20000);
  std::unique_ptr<gw::Communicator> comm;
  int world = 0, me = 0;
  std::vector<int> members;
  int64_t k = 0;
  auto t = gw::Transport::open(spec);
  if (!t.ok()) return fail(t.status());
  if (!join_name.empty()) {  // a replacement: the members' store, no launcher rank
    auto store = gw::make_file_store(store_dir);
    if (!store.ok()) return fail(store.status());
    auto c = gw::Communicator::join(*store, std::move(*t), join_name, gw::Millis(30000), o);
    if (!c.ok()) return fail(c.status());
    comm = std::move(*c);
    me = static_cast<int>(member_id);
    world = comm->size();
    k = -1;
  } else {
    auto info = gw::discover_launch();
    if (!info.ok()) return fail(info.status());
    auto store = store_dir.empty() ? gw::store_for_launch(*info, gw::Millis(30000))
                                   : gw::make_file_store(store_dir);
    if (!store.ok()) return fail(store.status());
    job_store = *store;
    me = info->rank;
    world = info->world_size;
    auto g = gw::Group::create(*store, std::move(*t), me, world, gw::Millis(30000), "shrink");
    if (!g.ok()) return fail(g.status());
    auto c = gw::Communicator::create(**g, o);
    if (!c.ok()) return fail(c.status());
    comm = std::move(*c);
    group_keep = std::move(*g);
    for (int r = 0; r < world; ++r) members.push_back(r);
  }
  // After a grow or a join: the step (the newcomer has none) and every rank's data id.
  auto sync_grown = [&](double t0_ms) -> gw::Status {
    int64_t next = k;
    GW_RETURN_IF_ERROR(comm->allreduce(&next, &next, 1, gw::DataType::kInt64, gw::ReduceOp::kMax));
    std::vector<int64_t> ids(static_cast<size_t>(comm->size()));
    const int64_t mine = me;
    GW_RETURN_IF_ERROR(comm->allgather(&mine, ids.data(), 1, gw::DataType::kInt64));
    k = next;
    members.assign(ids.begin(), ids.end());
    std::printf("grown size=%d ms=%.1f members=%s\n", comm->size(), now_ms() - t0_ms,
                join(members).c_str());
    std::fflush(stdout);
    return gw::Status();
  };
  if (!join_name.empty()) {
    if (gw::Status st = sync_grown(now_ms()); !st.ok()) return fail(st);
  }
  std::vector<float> in(count), out(count);
  size_t wrong = 0;
  bool shrunk_once = false;
  int64_t reshrunk_at = -1;
  std::printf("ready %d\n", me);
  std::fflush(stdout);
  while (k < iters) {
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    if (!stop_file.empty() && k % 10 == 0) {  // stop together: rank 0 looks for the file
      int64_t stop = comm->rank() == 0 && ::access(stop_file.c_str(), F_OK) == 0;
      gw::Status st = comm->allreduce(&stop, &stop, 1, gw::DataType::kInt64, gw::ReduceOp::kMax);
      if (st.ok() && stop) break;
    }
    gw::Status st;
    const bool again = every > 0 && k > 0 && k % every == 0 && k != reshrunk_at;
    const int me_now = comm->rank();
    if (me_now == 0 && ((k == shrink_at && !shrunk_once) || again)) {
      reshrunk_at = k;
      st = gw::Status(gw::Code::kAborted, "probe: shrink asked for at step " + std::to_string(k));
    } else {
      for (size_t i = 0; i < count; ++i) in[i] = input(me, k, i);
      st =
          comm->allreduce(in.data(), out.data(), count, gw::DataType::kFloat32, gw::ReduceOp::kSum);
    }
    if (st.ok()) {
      for (size_t i = 0; i < count; ++i) {
        float ref = 0;
        for (int r : members) ref += input(r, k, i);
        if (out[i] != ref) ++wrong;
      }
      if (k % 10 == 0) std::printf("step %lld\n", static_cast<long long>(k));
      std::fflush(stdout);
      ++k;
      continue;
    }
    std::printf("failed step=%lld code=%s culprit=%d\n", static_cast<long long>(k),
                gw::code_name(st.code()), st.rank());
    std::fflush(stdout);
    std::vector<int> ex;
    if (k == shrink_at && me_now == 0 && exclude >= 0) ex.push_back(static_cast<int>(exclude));
    shrunk_once = true;
    if (me == die_in_shrink) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ::kill(::getpid(), SIGKILL);
      }).detach();
    }
    const double t0_ms = now_ms();
    if (reinit) {  // the baseline: tear down, rendezvous again without the culprit
      std::vector<int> keep;
      for (int r = 0; r < comm->size(); ++r)
        if (r != st.rank()) keep.push_back(r);
      const int nr =
          static_cast<int>(std::find(keep.begin(), keep.end(), comm->rank()) - keep.begin());
      for (auto& m : keep) m = members[static_cast<size_t>(m)];
      members = keep;
      comm.reset();
      group_keep.reset();
      auto t2 = gw::Transport::open(spec);
      if (!t2.ok()) return fail(t2.status());
      auto g2 = gw::Group::create(job_store, std::move(*t2), nr, static_cast<int>(keep.size()),
                                  gw::Millis(30000), "reinit" + std::to_string(reinits++));
      if (!g2.ok()) return fail(g2.status());
      auto c2 = gw::Communicator::create(**g2, o);
      if (!c2.ok()) return fail(c2.status());
      comm = std::move(*c2);
      group_keep = std::move(*g2);
      int64_t next = k;
      if (gw::Status ag =
              comm->allreduce(&next, &next, 1, gw::DataType::kInt64, gw::ReduceOp::kMin);
          !ag.ok())
        return fail(ag);
      std::printf("reinit size=%d ms=%.1f\n", comm->size(), now_ms() - t0_ms);
      std::fflush(stdout);
      k = next;
      continue;
    }
    auto nc = comm->shrink(ex);
    if (!nc.ok()) {
      if (nc.status().code() == gw::Code::kAborted) {
        std::printf("excluded %s\n", std::string(nc.status().message()).c_str());
        std::fflush(stdout);
        return 0;
      }
      return fail(nc.status());
    }
    // Agree on the step: a rank may have finished step k before the failure reached it.
    int64_t next = k;
    gw::Status ag = (*nc)->allreduce(&next, &next, 1, gw::DataType::kInt64, gw::ReduceOp::kMin);
    const double ms = now_ms() - t0_ms;
    if (!ag.ok()) {
      std::printf("failed step=%lld code=%s culprit=%d\n", static_cast<long long>(k),
                  gw::code_name(ag.code()), ag.rank());
      std::fflush(stdout);
    }
    std::vector<int> kept, gone;
    for (int r = 0; r < (*nc)->size(); ++r)
      kept.push_back(members[static_cast<size_t>((*nc)->group().parent_rank(r))]);
    for (int r : members)
      if (std::find(kept.begin(), kept.end(), r) == kept.end()) gone.push_back(r);
    members = kept;
    comm = std::move(*nc);  // the broken one goes now (its group lives on in the new one)
    long fds = 0, threads = 0, rss = 0, heap = 0;
    usage(&fds, &threads, &rss, &heap);
    std::printf(
        "shrunk size=%d rank=%d ms=%.1f gone=%s fds=%ld threads=%ld rss_kb=%ld heap_kb=%ld\n",
        comm->size(), comm->rank(), ms, join(gone).c_str(), fds, threads, rss, heap);
    std::fflush(stdout);
    if (!ag.ok()) continue;  // the next allreduce fails too, and shrinks again
    k = next;
    if (regrow && comm->size() < world) {
      const double g0 = now_ms();
      auto gc =
          comm->grow(world - comm->size(), "regrow/" + std::to_string(grows++), gw::Millis(30000));
      if (!gc.ok()) return fail(gc.status());
      comm = std::move(*gc);
      if (gw::Status gs = sync_grown(g0); !gs.ok()) {
        std::printf("failed step=%lld code=%s culprit=%d\n", static_cast<long long>(k),
                    gw::code_name(gs.code()), gs.rank());
        std::fflush(stdout);
      }
    }
  }
  std::printf("done steps=%lld size=%d members=%s wrong=%zu\n", static_cast<long long>(k),
              comm->size(), join(members).c_str(), wrong);
  std::fflush(stdout);
  // Every survivor finishes before any leaves (a leaver would look failed to a slow one).
  (void)comm->barrier();
  comm.reset();
  return wrong == 0 ? 0 : 3;
}
