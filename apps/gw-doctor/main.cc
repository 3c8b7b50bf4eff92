// gw-doctor DIR: reads every rank's flight record (gw-flight-<rank>.json, written on a
// failure, a timeout, an abort, SIGUSR1 or Communicator::dump_flight_record()) and says what
// a person needs to know: the ranks behind and at which call, the calls that differ across
// ranks, the peers each unfinished rank waits for (docs/failures.md).
// Exit codes: 0 all agree and nothing is stuck; 1 a problem was found; 2 bad input.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "doctor.h"

int main(int argc, char** argv) {
  CLI::App app{"gw-doctor: diagnose a hang or failure from every rank's flight record"};
  std::string dir;
  bool as_json = false;
  app.add_option("dir", dir, "directory of the dumps (coll.flight_dir)")->required();
  app.add_flag("--json", as_json, "machine-readable output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<gw::doctor::Rank> ranks;
  std::string err;
  if (!gw::doctor::load_dir(dir, &ranks, &err)) {
    std::fprintf(stderr, "gw-doctor: %s\n", err.c_str());
    return 2;
  }
  const gw::doctor::Diagnosis d = gw::doctor::diagnose(ranks);
  if (as_json) {
    std::printf("%s\n", gw::doctor::report_json(ranks, d).dump(2).c_str());
  } else {
    std::fputs(gw::doctor::report(ranks, d).c_str(), stdout);
  }
  return d.problem() ? 1 : 0;
}
