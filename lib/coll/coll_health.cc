// The health query of a communicator (health_server.h, docs/failures.md): coll.health, what
// the server thread answers, and what the communicator's thread publishes for it.
#include <unistd.h>

#include <algorithm>
#include <cctype>
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
                "coll.flight_records > 0)"},
               {"coll.metrics_file", ConfigType::kString, "",
                "write this rank's counters as Prometheus text to this file every "
                "coll.metrics_interval_ms (through a temporary file and rename, for a "
                "node_exporter textfile collector); {rank} and {job} are replaced; empty: off "
                "(gw-doctor --live --prometheus asks every rank instead)"},
               {"coll.metrics_interval_ms", ConfigType::kInt, "5000",
                "how often coll.metrics_file is written (the health thread does it)"});

std::atomic<uint32_t> g_comms{0};  // the process's communicators: a unique socket name each

}  // namespace

Status coll::Health::init(Impl* prev) {
  // prev's thread is taken over, or stopped before its recorder moves here.
  std::unique_ptr<coll::HealthServer> heir = prev ? std::move(prev->health.server) : nullptr;
  auto own = [&] {
    heir.reset();
    if (im.flight.from) im.flight.adopt();
  };
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  ConfigReader rd(cfg);
  const bool on = rd.flag("coll.health");
  GW_RETURN_IF_ERROR(rd.status());
  if (!on || !(im.flight.recorder || im.flight.from)) {
    own();
    return Status();
  }
  char job[24];
  std::snprintf(job, sizeof(job), "%016llx", static_cast<unsigned long long>(im.group.job_id()));
  job_name = job;
  transport_name = im.group.transport().properties().name;
  peer_err.assign(static_cast<size_t>(im.n), "");
  const std::string name = std::string(coll::kHealthPrefix) + job + "/" + std::to_string(im.rank) +
                           "/" + std::to_string(getpid()) + "." +
                           std::to_string(g_comms.fetch_add(1, std::memory_order_relaxed));
  std::string metrics = rd.str("coll.metrics_file");
  const int64_t every = rd.in("coll.metrics_interval_ms", 100, 3'600'000);
  GW_RETURN_IF_ERROR(rd.status());
  coll::HealthServer::Tick tick;
  if (!metrics.empty()) {
    for (auto [key, val] :
         {std::pair<std::string, std::string>{"{rank}", std::to_string(im.rank)}, {"{job}", job}}) {
      for (size_t at = metrics.find(key); at != std::string::npos; at = metrics.find(key))
        metrics.replace(at, key.size(), val);
    }
    metrics_path = metrics;
    tick = [this] { write_metrics(); };
  }
  if (heir) {
    Status st = heir->rebind(
        name, [this] { return answer(); }, tick, static_cast<int>(every),
        [this] {
          if (im.flight.from) im.flight.adopt();
        });
    if (st.ok()) {
      server = std::move(heir);
      return Status();
    }
  }
  own();
  auto s = coll::HealthServer::start(
      name, [this] { return answer(); }, std::move(tick), static_cast<int>(every));
  if (!s.ok()) {  // a tool's convenience: the job goes on without it
    log::get("gw.coll")->warn("coll: rank {}: no health query: {}", im.rank,
                              s.status().to_string());
    return Status();
  }
  server = std::move(*s);
  return Status();
}

void coll::Health::set_broken(const Status& st) {
  if (!server) return;
  std::lock_guard<std::mutex> l(mu);
  broken = st;
}

void coll::Health::write_metrics() {
  refresh();
  uint64_t started = 0, finished = 0;
  for (const coll::FlightEntry& e : im.flight.recorder->snapshot(64)) {
    started = std::max<uint64_t>(started, e.seq);
    if (e.state == static_cast<uint8_t>(coll::FlightState::kOk))
      finished = std::max<uint64_t>(finished, e.seq);
  }
  std::string o;
  auto sample = [&](std::string m, uint64_t v) {
    m = "gradwire_" + m;
    for (char& ch : m)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    o += "# TYPE " + m + " gauge\n" + m + "{job=\"" + job_name + "\",rank=\"" +
         std::to_string(im.rank) + "\"} " + std::to_string(v) + "\n";
  };
  sample("up", 1);
  sample("last_started_seq", started);
  sample("last_finished_seq", finished);
  {
    std::lock_guard<std::mutex> l(mu);
    sample("broken", broken.ok() ? 0 : 1);
    for (const auto& [k, v] : counters) sample(k, v);
  }
  const std::string tmp = metrics_path + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    const bool ok = std::fwrite(o.data(), 1, o.size(), f) == o.size();
    if (std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), metrics_path.c_str()) == 0) return;
  }
  if (!metrics_warned) {  // once: the job goes on without its metrics file
    metrics_warned = true;
    log::get("gw.coll")->warn("coll: rank {}: cannot write coll.metrics_file {}", im.rank,
                              metrics_path);
  }
}

void coll::Health::refresh() {
  // The transport is read only while nobody drives it (no call in it, no background pass);
  // during a call the last reading is given with its age.
  ProgressGate& gate = im.group.transport().gate();
  if (gate.try_background()) {
    auto stats = im.group.transport().stats();
    std::vector<std::string> errs(static_cast<size_t>(im.n));
    for (int p = 0; p < im.n; ++p) {
      if (p == im.rank) continue;
      const Status es = im.group.endpoint(p).status();
      if (!es.ok()) errs[static_cast<size_t>(p)] = es.to_string();
    }
    gate.end_background();
    std::lock_guard<std::mutex> l(mu);
    counters.assign(stats.begin(), stats.end());
    peer_err = std::move(errs);
    counters_ns = static_cast<int64_t>(now_ns());
  }
}

std::string coll::Health::answer() {
  refresh();
  coll::FlightContext c;
  c.rank = im.rank;
  c.size = im.n;
  c.trigger = "health";
  c.transport = transport_name;
  c.job = job_name;
  c.waiting_known = true;
  c.waiting = waiting.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(mu);
    c.broken = broken;
    c.counters = counters;
    if (counters_ns) c.counters_age_ns = static_cast<int64_t>(now_ns()) - counters_ns;
    for (int p = 0; p < im.n; ++p) {
      if (p == im.rank) continue;
      coll::FlightPeer fp;
      fp.rank = p;
      fp.error = peer_err[static_cast<size_t>(p)];
      fp.endpoint_ok = fp.error.empty();
      fp.last_heard_ns = im.flight.heard_ns[static_cast<size_t>(p)].load(std::memory_order_relaxed);
      c.peers.push_back(std::move(fp));
    }
  }
  return im.flight.recorder->json(c, 32);  // enough to line ranks up; the whole ring is for dumps
}

}  // namespace gw
