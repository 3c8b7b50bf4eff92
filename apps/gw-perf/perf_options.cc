// gw-perf command line (CLI11). Names follow perftest where it has one (-s, -a, -n, -D, -b).
#include "perf_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>

namespace gw::perf {

Result<uint64_t> parse_size(std::string_view text) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (v > (uint64_t{1} << 50)) break;
    v = v * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  std::string_view suffix = text.substr(i);
  int shift = -1;
  if (suffix.empty() || suffix == "B" || suffix == "b") shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") shift = 10;
  if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") shift = 20;
  if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") shift = 30;
  if (i == 0 || shift < 0 || v > (uint64_t{1} << 40) >> shift) {
    return Status(Code::kInvalidArgument,
                  "bad size '" + std::string(text) + "' (use e.g. 64, 4K, 1M; at most 1T)");
  }
  return v << shift;
}

namespace {

// perftest's device options (-d, -x, -q) become rdma device arguments. Without -t they pick
// the rdma transport, as ib_send_bw would. @return false after printing why.
bool apply_rdma_options(Options& o, bool transport_given, const std::string& dev, int gid,
                        int qps) {
  if (dev.empty() && gid < 0 && qps <= 0) return true;
  if (!transport_given) o.transport = "rdma";
  if (o.transport != "rdma" && o.transport.rfind("rdma:", 0) != 0) {
    std::fprintf(stderr, "gw-perf: -d, -x and -q apply to -t rdma, not '%s'\n",
                 o.transport.c_str());
    return false;
  }
  auto add = [&](const char* key, const std::string& value) {
    if (o.transport.find(std::string(":") + key + "=") != std::string::npos ||
        o.transport.find(std::string(",") + key + "=") != std::string::npos) {
      std::fprintf(stderr, "gw-perf: %s= is given twice (in -t and as an option)\n", key);
      return false;
    }
    o.transport +=
        (o.transport.find(':') == std::string::npos ? ":" : ",") + std::string(key) + "=" + value;
    return true;
  };
  if (!dev.empty() && !add("dev", dev)) return false;
  if (gid >= 0 && !add("gid_index", std::to_string(gid))) return false;
  if (qps > 0 && !add("qps_per_conn", std::to_string(qps))) return false;
  if (qps > 0) o.qps = qps;
  return true;
}

}  // namespace

uint64_t default_iters(Test test) { return test == Test::kBw ? 5000 : 1000; }

uint64_t max_size(const Options& o) {
  return o.sizes.empty() ? 0 : *std::max_element(o.sizes.begin(), o.sizes.end());
}

Options parse_options(int argc, char** argv, int* exit_code) {
  Options o;
  *exit_code = -1;
  CLI::App app{
      "gw-perf: perftest-like bandwidth and latency over a gradwire transport.\n"
      "  server:  gw-perf [options]            (rank 0, listens on --port)\n"
      "  client:  gw-perf [options] HOST       (rank 1, runs the tests, prints results)\n"
      "  local:   gw-perf --ranks 2 [options]  (forks both ranks over 127.0.0.1)\n"
      "  launched: GW_RANK/GW_WORLD_SIZE/GW_MASTER_ADDR/GW_MASTER_PORT (or torchrun,\n"
      "            Open MPI, Slurm variables) with world size 2",
      "gw-perf"};
  std::string test = "bw", size_text;
  bool all = false;
  int streams = 0;
  int64_t timeout_ms = o.timeout.count();
  std::string ib_dev;
  int gid_index = -1, qps = 0;
  app.add_option("host", o.host, "server to connect to (omit to be the server)");
  app.add_option("-t,--transport", o.transport, "transport spec, e.g. tcp, tcp:streams=4, auto")
      ->capture_default_str();
  app.add_option("-d,--ib-dev", ib_dev, "rdma device, e.g. rxe0 (implies -t rdma)");
  app.add_option("-x,--gid-index", gid_index, "rdma GID index (implies -t rdma)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("-q,--qp", qps, "rdma queue pairs per connection (implies -t rdma)")
      ->check(CLI::Range(1, 8));
  app.add_option("--streams", streams, "shortcut: append streams=N to a tcp spec")
      ->check(CLI::Range(1, 64));
  app.add_option("-p,--port", o.port, "TCP store port of the server")->capture_default_str();
  app.add_option("--ranks", o.ranks, "fork this many ranks on this host (2)")
      ->check(CLI::IsMember({2}));
  app.add_option("--test", test, "bw or lat")
      ->check(CLI::IsMember({"bw", "lat"}))
      ->capture_default_str();
  app.add_flag("--pin", o.pin,
               "with --ranks: rank r runs on CPU r of those allowed (as taskset -c per "
               "process), so two busy-polling ranks never share a core");
  app.add_flag("-b,--bidirectional", o.bidir, "bw: both ranks send at once");
  app.add_option("-s,--size", size_text,
                 "message size, suffixes K/M/G, or a list: 64,4K,1M (default 65536)");
  app.add_flag("-a,--all", all, "all sizes 2 B .. 8 MiB, powers of two");
  app.add_option("-n,--iters", o.iters, "iterations per size (default bw 5000, lat 1000)");
  app.add_option("-D,--duration", o.duration_s, "seconds per size (instead of -n)")
      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--warmup", o.warmup,
                 "warm-up iterations per size (default: up to 64 MiB of traffic; bw at most "
                 "2x tx-depth, lat at most 100)");
  app.add_option("--tx-depth", o.tx_depth, "bw: outstanding sends")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("-r,--rx-depth", o.rx_depth,
                 "bw: receives kept posted ahead (as perftest's; capped by the transport's "
                 "max outstanding; --check: tx-depth)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--buffers", o.buffers,
                 "bw: message-sized buffers cycled per side (default 1, reused by every message "
                 "as perftest and iperf3 do; up to tx-depth: each message in flight in a buffer "
                 "of its own, the memory footprint of an application such as NCCL's proxy)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_flag("--busy", o.busy,
               "busy-poll: spin in wait (default: spin transport.spin_us, then sleep on the "
               "driver's fd)");
  app.add_flag("--check", o.check, "verify every byte received; non-zero exit on any error");
  app.add_flag("--json", o.json, "one JSON object per size on stdout");
  app.add_flag("--stats", o.stats, "print the transport's counters at the end (stderr)");
  app.add_flag("--print-config", o.print_config, "print the effective configuration and exit");
  app.add_option("--timeout", timeout_ms, "ms any wait may last before the peer is declared dead")
      ->check(CLI::Range(int64_t{1}, int64_t{86'400'000}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return o;
  }
  o.port_given = app.count("--port") > 0;
  if (!apply_rdma_options(o, app.count("--transport") > 0, ib_dev, gid_index, qps)) {
    *exit_code = 2;
    return o;
  }
  o.test = test == "lat" ? Test::kLat : Test::kBw;
  o.timeout = Millis(timeout_ms);
  if (streams > 0) {
    if (o.transport.rfind("tcp", 0) != 0) {
      std::fprintf(stderr, "gw-perf: --streams applies to tcp, not '%s'\n", o.transport.c_str());
      *exit_code = 2;
      return o;
    }
    o.transport += (o.transport.find(':') == std::string::npos ? ":" : ",") +
                   std::string("streams=") + std::to_string(streams);
  }
  if (o.bidir && o.test == Test::kLat) {
    std::fprintf(stderr, "gw-perf: -b applies to the bw test only\n");
    *exit_code = 2;
    return o;
  }
  if (all && !size_text.empty()) {
    std::fprintf(stderr, "gw-perf: give -s or -a, not both\n");
    *exit_code = 2;
    return o;
  }
  if (all) {
    for (uint64_t s = 2; s <= (uint64_t{8} << 20); s *= 2) o.sizes.push_back(s);
  } else if (!size_text.empty()) {
    // A list runs its sizes in order in one session (gw-compare measures each between rows).
    std::string_view rest = size_text;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      auto s = parse_size(rest.substr(0, comma));
      if (!s.ok()) {
        std::fprintf(stderr, "gw-perf: %s\n", std::string(s.status().message()).c_str());
        *exit_code = 2;
        return o;
      }
      o.sizes.push_back(*s);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  } else {
    o.sizes.push_back(65536);
  }
  if (o.iters == 0) o.iters = default_iters(o.test);
  return o;
}

}  // namespace gw::perf
