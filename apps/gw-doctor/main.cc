// gw-doctor DIR: reads every rank's flight record (gw-flight-<rank>.json, written on a
// failure, a timeout, an abort, SIGUSR1 or Communicator::dump_flight_record()) and says what
// a person needs to know: the ranks behind and at which call, the calls that differ across
// ranks, the peers each unfinished rank waits for (docs/failures.md).
// gw-doctor --live: the same from the running ranks of this host (their health sockets), and
// the ranks that do not answer; --watch repeats it, --prometheus prints the counters.
// Exit codes: 0 all agree and nothing is stuck; 1 a problem was found; 2 bad input.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "doctor.h"

namespace {

struct Args {
  std::string dir, job;
  bool live = false, as_json = false, prom = false;
  int timeout_ms = 500;
  double stuck_ms = 1000, watch_s = 0;
};

int from_dir(const Args& a) {
  std::vector<gw::doctor::Rank> ranks;
  std::string err;
  if (!gw::doctor::load_dir(a.dir, &ranks, &err)) {
    std::fprintf(stderr, "gw-doctor: %s\n", err.c_str());
    return 2;
  }
  const gw::doctor::Diagnosis d = gw::doctor::diagnose(ranks);
  if (a.as_json) {
    std::printf("%s\n", gw::doctor::report_json(ranks, d).dump(2).c_str());
  } else {
    std::fputs(gw::doctor::report(ranks, d).c_str(), stdout);
  }
  return d.problem() ? 1 : 0;
}

int live_once(const Args& a) {
  const std::vector<gw::doctor::Job> jobs = gw::doctor::query_live(a.job, a.timeout_ms);
  if (jobs.empty()) {
    std::fprintf(stderr, "gw-doctor: no gradwire rank%s on this host (coll.health off?)\n",
                 a.job.empty() ? "" : (" of job " + a.job).c_str());
    return 2;
  }
  int rc = 0;
  nlohmann::json all = nlohmann::json::array();
  for (const gw::doctor::Job& j : jobs) {
    gw::doctor::Live live{j.silent, a.stuck_ms};
    const gw::doctor::Diagnosis d = gw::doctor::diagnose(j.ranks, &live);
    if (d.problem()) rc = 1;
    if (a.prom) {
      std::fputs(gw::doctor::prometheus(j).c_str(), stdout);
    } else if (a.as_json) {
      nlohmann::json r = gw::doctor::report_json(j.ranks, d);
      r["job"] = j.id;
      all.push_back(std::move(r));
    } else {
      std::printf("job %s:\n%s", j.id.c_str(), gw::doctor::report(j.ranks, d).c_str());
    }
  }
  if (a.as_json && !a.prom) std::printf("%s\n", all.dump(2).c_str());
  std::fflush(stdout);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gw-doctor: diagnose a hang or failure from every rank's flight record"};
  Args a;
  app.add_option("dir", a.dir, "directory of the dumps (coll.flight_dir)");
  app.add_flag("--live", a.live, "ask the running ranks of this host instead of reading dumps");
  app.add_option("--job", a.job, "--live: only this job (the id it prints)");
  app.add_option("--timeout-ms", a.timeout_ms,
                 "--live: a rank that does not answer by then is named")
      ->check(CLI::Range(10, 60000));
  app.add_option("--stuck-ms", a.stuck_ms, "--live: a call running this long counts as stuck")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--watch", a.watch_s, "--live: ask again every this many seconds")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_flag("--prometheus", a.prom, "--live: the counters as Prometheus text");
  app.add_flag("--json", a.as_json, "machine-readable output");
  try {
    app.parse(argc, argv);
    if (a.live == !a.dir.empty())
      throw CLI::ValidationError("give a directory of dumps, or --live (not both)");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!a.live) return from_dir(a);
  for (;;) {
    const int rc = live_once(a);
    if (a.watch_s <= 0) return rc;
    std::this_thread::sleep_for(std::chrono::duration<double>(a.watch_s));
    const std::time_t t = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%F %T", std::localtime(&t));
    std::printf("--- %s\n", stamp);
  }
}
