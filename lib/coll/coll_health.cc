// The health query of a communicator (health_server.h, docs/failures.md): coll.health, what
// the server thread answers, and what the communicator's thread publishes for it.
#include <unistd.h>

#include <cstdio>

#include "coll_impl.h"
#include "gw_config.h"
#include "gw_time.h"
#include "log.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(coll_health,
               {"coll.health", ConfigType::kBool, "true",
                "answer gw-doctor --live on an abstract unix socket \"@gw-health/<job>/<rank>/"
                "<pid>.<n>\" (a thread per communicator, asleep until asked; needs "
                "coll.flight_records > 0)"});

std::atomic<uint32_t> g_comms{0};  // the process's communicators: a unique socket name each

}  // namespace

Status Communicator::Impl::health_init() {
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  ConfigReader rd(cfg);
  const bool on = rd.flag("coll.health");
  GW_RETURN_IF_ERROR(rd.status());
  if (!on || !flight) return Status();
  char job[24];
  std::snprintf(job, sizeof(job), "%016llx", static_cast<unsigned long long>(group.job_id()));
  health_job = job;
  health_transport = group.transport().properties().name;
  health_peer_err.assign(static_cast<size_t>(n), "");
  const std::string name = std::string(coll::kHealthPrefix) + job + "/" + std::to_string(rank) +
                           "/" + std::to_string(getpid()) + "." +
                           std::to_string(g_comms.fetch_add(1, std::memory_order_relaxed));
  auto s = coll::HealthServer::start(name, [this] { return health_answer(); });
  if (!s.ok()) {  // a tool's convenience: the job goes on without it
    log::get("gw.coll")->warn("coll: rank {}: no health query: {}", rank, s.status().to_string());
    return Status();
  }
  health = std::move(*s);
  return Status();
}

void Communicator::Impl::health_set_broken(const Status& st) {
  if (!health) return;
  std::lock_guard<std::mutex> l(health_mu);
  health_broken = st;
}

std::string Communicator::Impl::health_answer() {
  // The transport is read only while nobody drives it (no call in it, no background pass);
  // during a call the last reading is given with its age.
  ProgressGate& gate = group.transport().gate();
  if (gate.try_background()) {
    auto stats = group.transport().stats();
    std::vector<std::string> errs(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      const Status es = group.endpoint(p).status();
      if (!es.ok()) errs[static_cast<size_t>(p)] = es.to_string();
    }
    gate.end_background();
    std::lock_guard<std::mutex> l(health_mu);
    health_counters.assign(stats.begin(), stats.end());
    health_peer_err = std::move(errs);
    health_counters_ns = static_cast<int64_t>(now_ns());
  }
  coll::FlightContext c;
  c.rank = rank;
  c.size = n;
  c.trigger = "health";
  c.transport = health_transport;
  c.job = health_job;
  c.waiting_known = true;
  c.waiting = health_waiting.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(health_mu);
    c.broken = health_broken;
    c.counters = health_counters;
    if (health_counters_ns) c.counters_age_ns = static_cast<int64_t>(now_ns()) - health_counters_ns;
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      coll::FlightPeer fp;
      fp.rank = p;
      fp.error = health_peer_err[static_cast<size_t>(p)];
      fp.endpoint_ok = fp.error.empty();
      fp.last_heard_ns = heard_ns[static_cast<size_t>(p)].load(std::memory_order_relaxed);
      c.peers.push_back(std::move(fp));
    }
  }
  return flight->json(c, 32);  // enough to line ranks up; the whole ring is for dumps
}

}  // namespace gw
