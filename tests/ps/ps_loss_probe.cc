// One rank of a parameter-server job that loses a rank (test_ps_loss.py starts the ranks as
// processes, GW_RANK etc. set, and SIGKILLs the victim). tcp on loopback, ps.on_loss continue.
//
//   ps_loss_probe worker bsp|ssp ROUNDS K   1 server, 3 workers; worker rank 3 stops after
//       pushing round K ("READY") and is killed. BSP: every pull of the survivors is checked
//       element by element against the round's sum with and without the victim, and printed
//       as "round T with|without". The server prints its pushes (the victim's counted pushes
//       follow from them) and, for SSP, checks its final parameters element by element.
//   ps_loss_probe server ROUNDS K FLAG      2 servers, 2 workers, one 64-float key per
//       server; after K rounds the workers say READY and wait for FLAG (server 1 killed), then
//       pull the lost key (RemoteError, rank 1, naming the key; worker 0 also has a pull of it
//       in flight) and go on with the other.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gw_group.h"
#include "gw_ps.h"
#include "gw_store.h"
#include "gw_transport.h"

namespace gw {
namespace {

constexpr Nanos kTimeout = Millis(20000);
constexpr size_t kN = 64;

// Worker w's push of round t, element i: small integers, so every sum is exact.
float grad(int w, int t, size_t i) {
  return static_cast<float>((w + 1) + 8 * t + 1024 * static_cast<int>(i % 4));
}

int fail(int rank, const std::string& what, const Status& st) {
  std::printf("rank %d FAIL %s: %s\n", rank, what.c_str(), st.to_string().c_str());
  return 1;
}

// One round of `w` on `key`: push, wait, pull, wait.
Status round(PsWorker& ps, uint64_t key, int w, int t, std::vector<float>& out) {
  std::vector<float> g(kN);
  for (size_t i = 0; i < kN; ++i) g[i] = grad(w, t, i);
  GW_ASSIGN_OR_RETURN(PsHandle h, ps.push(key, g));
  GW_RETURN_IF_ERROR(ps.wait(h, kTimeout));
  GW_ASSIGN_OR_RETURN(PsHandle p, ps.pull(key, out));
  return ps.wait(p, kTimeout);
}

// A pulled round: the sum over `workers`, with or without worker `victim`.
const char* classify(const std::vector<float>& got, int t, int workers, int victim) {
  bool with = true, without = true;
  for (size_t i = 0; i < kN; ++i) {
    float all = 0, rest = 0;
    for (int w = 0; w < workers; ++w) {
      all += grad(w, t, i);
      if (w != victim) rest += grad(w, t, i);
    }
    with &= got[i] == all;
    without &= got[i] == rest;
  }
  return with ? "with" : without ? "without" : nullptr;
}

int worker_loss(Group& g, bool ssp, int rounds, int k) {
  const int rank = g.rank(), workers = g.size() - 1, victim = workers - 1;
  std::vector<KeySpec> keys{{7, kN}};
  PsOptions o;
  o.mode = ssp ? Consistency::kSsp : Consistency::kBsp;
  o.staleness = ssp ? 1 : 0;
  o.timeout = kTimeout;
  if (rank == 0) {
    auto s = PsServer::create(g, keys, o, make_sum_updater());
    if (!s.ok()) return fail(rank, "create", s.status());
    Status st = (*s)->serve(kTimeout);
    const PsServerStats& stats = (*s)->stats();
    std::printf("server pushes %llu live %d lost %llu\n",
                static_cast<unsigned long long>(stats.pushes), (*s)->live_workers(),
                static_cast<unsigned long long>(stats.lost_workers));
    if (!st.ok()) return fail(rank, "serve", st);
    if (ssp) {  // every counted push summed: the survivors' all, the victim's first n
      const int64_t n = static_cast<int64_t>(stats.pushes) - int64_t{rounds} * (workers - 1);
      auto v = (*s)->part_values(0);
      if (!v.ok()) return fail(rank, "part_values", v.status());
      for (size_t i = 0; i < kN; ++i) {
        float want = 0;
        for (int w = 0; w < workers; ++w)
          for (int t = 0; t < (w == victim ? n : rounds); ++t) want += grad(w, t, i);
        if ((*v)[i] != want) {
          std::printf("rank 0 FAIL final element %zu is %g, want %g\n", i, (*v)[i], want);
          return 1;
        }
      }
      std::printf("server final ok\n");
    }
    std::fflush(stdout);
    return 0;
  }
  auto ps = PsWorker::create(g, keys, o);
  if (!ps.ok()) return fail(rank, "create", ps.status());
  const int w = (*ps)->worker_index();
  std::vector<float> out(kN);
  for (int t = 0; t < rounds; ++t) {
    if (w == victim && t == k) {  // push round k, then wait to be killed
      std::vector<float> gr(kN);
      for (size_t i = 0; i < kN; ++i) gr[i] = grad(w, t, i);
      auto h = (*ps)->push(7, gr);
      if (!h.ok() || !(*ps)->wait(*h, kTimeout).ok()) return fail(rank, "last push", Status());
      std::printf("READY\n");
      std::fflush(stdout);
      for (;;) ::pause();
    }
    Status st = round(**ps, 7, w, t, out);
    if (!st.ok()) return fail(rank, "round " + std::to_string(t), st);
    if (ssp) continue;  // what an SSP pull sees depends on timing: the server checks the sum
    const char* c = classify(out, t, workers, victim);
    if (!c) {
      std::printf("rank %d FAIL round %d: element 0 is %g, neither sum\n", rank, t, out[0]);
      return 1;
    }
    std::printf("rank %d round %d %s\n", rank, t, c);
  }
  Status st = (*ps)->finish(kTimeout);
  if (!st.ok()) return fail(rank, "finish", st);
  std::printf("rank %d done\n", rank);
  std::fflush(stdout);
  return 0;
}

int server_loss(Group& g, int rounds, int k, const char* flag) {
  const int rank = g.rank();
  std::vector<KeySpec> keys{{1, kN}, {2, kN}, {3, kN}, {4, kN}};
  PsOptions o;
  o.servers = 2;
  o.min_part_bytes = 1 << 20;  // keys whole, each on one server
  o.timeout = kTimeout;
  if (rank < 2) {
    auto s = PsServer::create(g, keys, o, make_sum_updater());
    if (!s.ok()) return fail(rank, "create", s.status());
    Status st = (*s)->serve(kTimeout);
    if (!st.ok()) return fail(rank, "serve", st);
    std::printf("server %d done, lost servers %llu\n", rank,
                static_cast<unsigned long long>((*s)->stats().lost_servers));
    std::fflush(stdout);
    return 0;
  }
  auto ps = PsWorker::create(g, keys, o);
  if (!ps.ok()) return fail(rank, "create", ps.status());
  uint64_t kept = 0, lost = 0;  // a key on server 0 and one on server 1
  const PsLayout& l = (*ps)->layout();
  for (uint32_t ki = 0; ki < l.keys().size(); ++ki)
    (l.parts()[l.first_part(ki)].server == 0 ? kept : lost) = l.keys()[ki].key;
  if (!kept || !lost) return fail(rank, "layout puts every key on one server", Status());
  const int w = (*ps)->worker_index();
  std::vector<float> out(kN);
  auto check = [&](int t) {
    for (size_t i = 0; i < kN; ++i)
      if (out[i] != grad(0, t, i) + grad(1, t, i)) return false;
    return true;
  };
  for (int t = 0; t < k; ++t) {
    for (uint64_t key : {kept, lost}) {
      Status st = round(**ps, key, w, t, out);
      if (!st.ok()) return fail(rank, "round " + std::to_string(t), st);
      if (!check(t)) return fail(rank, "round " + std::to_string(t) + " values", Status());
    }
  }
  // Worker 0 leaves a pull of the lost key in flight (round k lacks worker 1's push).
  std::optional<PsHandle> inflight;
  if (w == 0) {
    std::vector<float> gr(kN, 1.0f);
    auto h = (*ps)->push(lost, gr);
    if (!h.ok() || !(*ps)->wait(*h, kTimeout).ok()) return fail(rank, "push round k", Status());
    auto p = (*ps)->pull(lost, out);
    if (!p.ok()) return fail(rank, "pull in flight", p.status());
    inflight = *p;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  Deadline dl(kTimeout);
  while (::access(flag, F_OK) != 0 && !dl.expired()) {
    (void)(*ps)->progress();
    std::this_thread::sleep_for(Millis(1));
  }
  auto expect_lost = [&](const char* what, const Status& st) {
    const bool ok = st.code() == Code::kRemoteError && st.rank() == 1 &&
                    st.message().find("server rank 1") != std::string::npos &&
                    st.message().find("key " + std::to_string(lost)) != std::string::npos;
    std::printf("rank %d %s of lost key %llu: %s: %s\n", rank, what,
                static_cast<unsigned long long>(lost), ok ? "ok" : "WRONG", st.to_string().c_str());
    return ok;
  };
  if (inflight && !expect_lost("in-flight pull", (*ps)->wait(*inflight, kTimeout))) return 1;
  auto p = (*ps)->pull(lost, out);  // refused at once, or posted before the loss is known
  if (!expect_lost("pull", p.ok() ? (*ps)->wait(*p, kTimeout) : p.status())) return 1;
  std::vector<float> gr(kN, 1.0f);
  if (!expect_lost("push", (*ps)->push(lost, gr).status())) return 1;
  for (int t = k; t < rounds; ++t) {
    Status st = round(**ps, kept, w, t, out);
    if (!st.ok()) return fail(rank, "kept key round " + std::to_string(t), st);
    if (!check(t)) return fail(rank, "kept key round " + std::to_string(t) + " values", Status());
  }
  Status st = (*ps)->finish(kTimeout);
  if (!st.ok()) return fail(rank, "finish", st);
  std::printf("rank %d done\n", rank);
  std::fflush(stdout);
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 5 || (std::strcmp(argv[1], "server") == 0 && argc < 6)) {
    std::fprintf(stderr, "usage: %s worker bsp|ssp ROUNDS K | server - ROUNDS K FLAG\n", argv[0]);
    return 2;
  }
  auto info = discover_launch();
  if (!info.ok()) return fail(-1, "launch", info.status());
  auto store = store_for_launch(*info, kTimeout);
  if (!store.ok()) return fail(info->rank, "store", store.status());
  auto t = Transport::open("tcp:iface=lo");
  if (!t.ok()) return fail(info->rank, "transport", t.status());
  auto g = Group::create(*store, std::move(*t), info->rank, info->world_size, kTimeout);
  if (!g.ok()) return fail(info->rank, "group", g.status());
  const int rounds = std::atoi(argv[3]), k = std::atoi(argv[4]);
  if (std::strcmp(argv[1], "server") == 0) return server_loss(**g, rounds, k, argv[5]);
  return worker_loss(**g, std::strcmp(argv[2], "ssp") == 0, rounds, k);
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) { return gw::run(argc, argv); }
