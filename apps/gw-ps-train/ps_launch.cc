// Local spawning and launcher join for gw-ps-train and gw-ps-perf. Setup only.
#include "ps_launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace gw::psapp {

int fail(const char* app, const Status& st) {
  std::fprintf(stderr, "%s: %s\n", app, st.to_string().c_str());
  return 1;
}

bool launched() { return discover_launch().ok(); }

Result<Launched> join(Nanos timeout) {
  GW_ASSIGN_OR_RETURN(LaunchInfo info, discover_launch());
  Launched l;
  l.rank = info.rank;
  l.size = info.world_size;
  GW_ASSIGN_OR_RETURN(l.store, store_for_launch(info, timeout));
  return l;
}

Result<std::unique_ptr<Group>> make_group(const Launched& l, const std::string& spec,
                                          const std::string& prefix, Nanos timeout) {
  GW_ASSIGN_OR_RETURN(auto t, Transport::open(spec));
  return Group::create(l.store, std::move(t), l.rank, l.size, timeout, prefix);
}

Status end_phase(const Launched& l, const std::string& prefix, Nanos timeout) {
  return store_barrier(*l.store, prefix + "/left", l.rank, l.size, timeout);
}

Status leave(const Launched& l, Nanos timeout) {
  GW_RETURN_IF_ERROR(l.store->set("exit/" + std::to_string(l.rank), "1"));
  if (l.rank != 0) return Status();
  std::vector<std::string> keys;
  for (int r = 0; r < l.size; ++r) keys.push_back("exit/" + std::to_string(r));
  return wait_ranks(*l.store, keys, timeout, "reach the end of the job");
}

int start(const char* app, int ranks, bool threads, char** argv, Nanos timeout,
          const std::function<int(const Launched&)>& body) {
  if (threads || !launched()) {
    if (ranks == 0) {
      std::fprintf(stderr, "%s: %s; use --ranks N\n", app,
                   threads ? "--threads needs the rank count" : "no launcher variables");
      return 2;
    }
    return threads ? run_threads(ranks, body) : spawn_local(ranks, argv, timeout + Millis(2000));
  }
  auto l = join(timeout);
  if (!l.ok()) return fail(app, l.status());
  return body(*l);
}

int run_threads(int ranks, const std::function<int(const Launched&)>& body) {
  auto store = make_in_process_store();
  std::vector<int> codes(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r) {
    th.emplace_back([&, r] { codes[static_cast<size_t>(r)] = body(Launched{r, ranks, store}); });
  }
  for (auto& t : th) t.join();
  for (int c : codes)
    if (c != 0) return c;
  return 0;
}

int spawn_local(int ranks, char** argv, Nanos grace) {
  auto port = pick_store_port();
  if (!port.ok()) return fail(argv[0], port.status());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(static_cast<size_t>(ranks), -1);
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      ::setenv("GW_RANK", std::to_string(r).c_str(), 1);
      ::setenv("GW_WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      ::setenv("GW_MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("GW_MASTER_PORT", std::to_string(*port).c_str(), 1);
      ::execv("/proc/self/exe", argv);
      std::perror("execv /proc/self/exe");
      ::_exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
  }
  int result = 0, alive = ranks;
  Clock::time_point kill_at = Clock::time_point::max();
  while (alive > 0) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (Clock::now() >= kill_at) {
        for (pid_t p : pids)
          if (p > 0) ::kill(p, SIGKILL);
        std::fprintf(stderr, "%s: killed the ranks still running after a rank failed\n", argv[0]);
        kill_at = Clock::time_point::max();
      }
      std::this_thread::sleep_for(Millis(20));
      continue;
    }
    int rank = 0;
    for (int r = 0; r < ranks; ++r)
      if (pids[static_cast<size_t>(r)] == pid) rank = r;
    pids[static_cast<size_t>(rank)] = -1;
    --alive;
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (WIFSIGNALED(st))
      std::fprintf(stderr, "%s: rank %d died of signal %d\n", argv[0], rank, WTERMSIG(st));
    if (code != 0 && result == 0) {
      result = code;
      kill_at = Clock::now() + grace;
    }
  }
  return result;
}

}  // namespace gw::psapp
