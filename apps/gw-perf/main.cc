// gw-perf: perftest-like bandwidth and latency benchmark over a gradwire transport.
#include <signal.h>

#include <cstdio>
#include <string>

#include "gw_config.h"
#include "perf_launch.h"
#include "perf_options.h"

namespace {

// The configuration the transport would run with: global config plus the spec's arguments.
int print_config(const std::string& spec) {
  auto cfg = gw::Config::global();
  if (!cfg.ok()) {
    std::fprintf(stderr, "gw-perf: %s\n", cfg.status().to_string().c_str());
    return 1;
  }
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    gw::Status st = cfg->apply_kvargs(spec.substr(0, colon), spec.substr(colon + 1));
    if (!st.ok()) {
      std::fprintf(stderr, "gw-perf: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  std::fputs(cfg->dump().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = -1;
  gw::perf::Options opt = gw::perf::parse_options(argc, argv, &exit_code);
  if (exit_code >= 0) return exit_code;
  if (opt.print_config) return print_config(opt.transport);
  // A dead peer must give an error message, never a silent death by SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  if (opt.ranks == 2) return gw::perf::run_forked(opt);
  return gw::perf::run_process(opt);
}
