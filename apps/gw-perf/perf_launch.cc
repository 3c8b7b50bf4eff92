// Bootstrap of the two gw-perf ranks. Setup only.
#include "perf_launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "gw_group.h"
#include "perf_run.h"

namespace gw::perf {

namespace {

int fail(const Status& st) {
  std::fprintf(stderr, "gw-perf: %s\n", st.to_string().c_str());
  return 1;
}

// --pin: rank r on the r-th CPU this process may use (modulo their number).
Status pin_to_cpu(int r) {
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return Status(Code::kSystemError, "gw-perf --pin: sched_getaffinity", errno);
  int want = r % CPU_COUNT(&allowed);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed) || want-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0)
      return Status(Code::kSystemError,
                    "gw-perf --pin: sched_setaffinity to CPU " + std::to_string(c), errno);
    return Status();
  }
  return Status(Code::kInternal, "gw-perf --pin: no allowed CPU");
}

// tcp between two local processes goes over lo unless the spec says otherwise.
std::string local_spec(const std::string& spec) {
  if (spec.rfind("tcp", 0) != 0 || (spec.size() > 3 && spec[3] != ':')) return spec;
  if (spec.find("iface=") != std::string::npos || spec.find("subnet=") != std::string::npos) {
    return spec;
  }
  return spec + (spec.size() == 3 ? ":" : ",") + "iface=lo";
}

struct Rendezvous {
  int rank = 0;
  std::shared_ptr<Store> store;
  std::unique_ptr<TcpStoreServer> server;  // rank 0 of a two-host or forked run
};

Result<Rendezvous> rendezvous(const Options& opt) {
  Rendezvous rv;
  if (opt.ranks == 0) {
    auto launch = discover_launch();
    if (launch.ok()) {
      if (launch->world_size != 2) {
        return Status(Code::kInvalidArgument, "gw-perf runs on 2 ranks; " + launch->source +
                                                  " launched " +
                                                  std::to_string(launch->world_size));
      }
      rv.rank = launch->rank;
      GW_ASSIGN_OR_RETURN(rv.store, store_for_launch(*launch, opt.timeout));
      return rv;
    }
    if (launch.status().code() != Code::kUnavailable) return launch.status();
  }
  if (!opt.host.empty()) {
    rv.rank = 1;
    GW_ASSIGN_OR_RETURN(rv.store, connect_tcp_store(opt.host, opt.port, opt.timeout));
    return rv;
  }
  GW_ASSIGN_OR_RETURN(rv.server,
                      TcpStoreServer::start(opt.ranks ? "127.0.0.1" : "0.0.0.0", opt.port));
  if (opt.ranks == 0) {
    std::fprintf(stderr, "gw-perf server: waiting up to %lld ms for a client on port %u\n",
                 static_cast<long long>(opt.timeout.count()), rv.server->port());
  }
  GW_ASSIGN_OR_RETURN(rv.store, connect_tcp_store("127.0.0.1", rv.server->port(), opt.timeout));
  return rv;
}

}  // namespace

int run_process(const Options& opt) {
  auto rv = rendezvous(opt);
  if (!rv.ok()) return fail(rv.status());
  // Drivers that resolve "auto" from the launcher's rank (dpdk's role=auto) must see the rank
  // this process took here, not an unset variable (both forked ranks would read 0).
  ::setenv("GW_RANK", std::to_string(rv->rank).c_str(), 1);
  auto transport = Transport::open(opt.transport);
  if (!transport.ok()) return fail(transport.status());
  auto group = Group::create(rv->store, std::move(*transport), rv->rank, 2, opt.timeout, "gw-perf");
  if (!group.ok()) return fail(group.status());
  return rv->rank == 1 ? run_client(**group, opt) : run_server(**group, opt);
}

int run_forked(const Options& opt) {
  Options o = opt;
  o.transport = local_spec(o.transport);
  if (!o.port_given) {
    auto port = pick_store_port();
    if (!port.ok()) return fail(port.status());
    o.port = *port;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::array<pid_t, 2> pids{-1, -1};
  for (int r = 0; r < 2; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("gw-perf: fork");
      if (r == 1) ::kill(pids[0], SIGKILL);
      return 1;
    }
    if (pid == 0) {
      if (o.pin) {
        Status st = pin_to_cpu(r);
        if (!st.ok()) ::_exit(fail(st));
      }
      o.host = r == 0 ? "" : "127.0.0.1";
      int rc = run_process(o);
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(rc);
    }
    pids[r] = pid;
  }
  // Reap both. Once one has failed, the survivor should see its peer gone (RemoteError) or
  // time out by itself; it is killed if it has not within --timeout plus a grace period.
  int result = 0, alive = 2;
  Clock::time_point kill_at = Clock::time_point::max();
  while (alive > 0) {
    int st = 0;
    // Sleep in waitpid until a rank ends: a parent waking every 10 ms would preempt a
    // busy-polling rank (and show in the latency tail). Polled only once the kill is armed.
    const bool armed = kill_at != Clock::time_point::max();
    pid_t pid = ::waitpid(-1, &st, armed ? WNOHANG : 0);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (Clock::now() >= kill_at) {
        for (pid_t p : pids) {
          if (p > 0) ::kill(p, SIGKILL);
        }
        std::fprintf(stderr, "gw-perf: killed the surviving rank after its peer failed\n");
        kill_at = Clock::time_point::max();
        if (result == 0) result = 1;
      }
      std::this_thread::sleep_for(Millis(10));
      continue;
    }
    const int rank = pid == pids[0] ? 0 : 1;
    pids[rank] = -1;
    --alive;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (WIFSIGNALED(st)) {
      std::fprintf(stderr, "gw-perf: rank %d died of signal %d\n", rank, WTERMSIG(st));
    }
    if (code != 0) {
      if (result == 0) result = code;
      if (alive > 0 && kill_at == Clock::time_point::max()) {
        kill_at = Clock::now() + opt.timeout + Millis(2000);
      }
    }
  }
  return result;
}

}  // namespace gw::perf
