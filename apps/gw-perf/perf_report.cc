// Result statistics and perftest-shaped output.
#include "perf_report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace gw::perf {

namespace {
constexpr double kMB = 1024.0 * 1024.0;
const char* kRule =
    "---------------------------------------------------------------------------------------";

// Nearest-rank percentile of sorted values.
uint64_t percentile(std::span<const uint64_t> sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// Fields every JSON row has, up to and including the comma after them.
void json_begin(const Options& o, const char* test) {
  std::printf("{\"test\":\"%s\",\"transport\":\"", test);
  for (char c : o.transport) {
    if (c == '"' || c == '\\') std::putchar('\\');
    std::putchar(c);
  }
  std::printf("\",\"busy_poll\":%s,\"check\":%s,", o.busy ? "true" : "false",
              o.check ? "true" : "false");
}
void end_row(uint64_t errors, uint64_t size) {
  if (errors != 0) {
    std::fprintf(stderr, "gw-perf: --check: %" PRIu64 " bytes wrong at size %" PRIu64 "\n", errors,
                 size);
  }
  std::fflush(stdout);
}
}  // namespace

double peak_rate(std::span<const uint64_t> t, size_t min_msgs, uint64_t size) {
  constexpr uint64_t kMinWindowBytes = uint64_t{16} << 20;
  size_t window =
      std::max<size_t>(min_msgs, (kMinWindowBytes + size - 1) / std::max<uint64_t>(size, 1));
  // Batches: (time, messages completed up to and including it).
  std::vector<std::pair<uint64_t, size_t>> b;
  for (size_t i = 0; i < t.size(); ++i) {
    if (b.empty() || t[i] != b.back().first) b.emplace_back(t[i], 0);
    b.back().second = i + 1;
  }
  if (b.size() < 2 || t.size() - b.front().second < window) return 0;
  double best = 0;
  size_t j = 1;
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    j = std::max(j, i + 1);
    while (j < b.size() && b[j].second - b[i].second < window) ++j;
    if (j == b.size()) break;
    double dt = static_cast<double>(b[j].first - b[i].first) * 1e-9;
    double bytes = static_cast<double>((b[j].second - b[i].second) * size);
    best = std::max(best, bytes / dt);
  }
  return best;
}

LatResult lat_stats(std::span<uint64_t> rtt, uint64_t size) {
  LatResult r;
  r.size = size;
  r.iters = rtt.size();
  if (rtt.empty()) return r;
  std::sort(rtt.begin(), rtt.end());
  const double half_us = 0.5e-3;  // ns round trip -> us one way
  double sum = 0, sq = 0;
  for (uint64_t v : rtt) sum += static_cast<double>(v);
  double mean = sum / static_cast<double>(rtt.size());
  for (uint64_t v : rtt) sq += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
  r.t_min = static_cast<double>(rtt.front()) * half_us;
  r.t_max = static_cast<double>(rtt.back()) * half_us;
  r.t_typical = static_cast<double>(percentile(rtt, 0.5)) * half_us;
  r.t_avg = mean * half_us;
  r.t_stdev = std::sqrt(sq / static_cast<double>(rtt.size())) * half_us;
  r.p99 = static_cast<double>(percentile(rtt, 0.99)) * half_us;
  r.p999 = static_cast<double>(percentile(rtt, 0.999)) * half_us;
  return r;
}

void print_stats(const char* role, const std::map<std::string, uint64_t>& stats) {
  for (const auto& [k, v] : stats) std::fprintf(stderr, "%s: %s %" PRIu64 "\n", role, k.c_str(), v);
}

void print_header(const Options& o, const TransportProperties& props, uint32_t depth,
                  uint32_t rx_depth) {
  if (o.json) return;
  const bool bw = o.test == Test::kBw;
  std::printf("%s\n", kRule);
  std::printf("                    %s Test (gradwire gw-perf)\n",
              bw ? (o.bidir ? "Send Bidirectional BW" : "Send BW") : "Send Latency");
  std::printf(" Transport       : %s (driver %s, device %s)\n", o.transport.c_str(),
              props.name.c_str(), props.device.empty() ? "-" : props.device.c_str());
  if (props.name == "rdma") std::printf(" Number of qps   : %d\n", o.qps);
  if (bw) std::printf(" TX depth        : %u\n", depth);
  if (bw) std::printf(" RX depth        : %u\n", rx_depth);
  if (bw && !o.check) std::printf(" Buffers         : %u per side\n", o.buffers);
  std::printf(
      " Wait mode       : %s\n",
      o.busy ? "busy-poll (--busy)" : "blocking (spin transport.spin_us, then sleep on fd)");
  std::printf(" Data check      : %s\n", o.check ? "ON (every byte)" : "OFF");
  if (o.duration_s > 0) {
    std::printf(" Duration        : %.3g s per size\n", o.duration_s);
  }
  if (bw)
    std::printf(" Units           : MB = 2^20 bytes; peak over >= tx-depth messages and 16 MiB\n");
  else
    std::printf(" Latency         : half round trip\n");
  std::printf("%s\n", kRule);
  if (bw) {
    std::printf(
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
        "MsgRate[Mpps]\n");
  } else {
    std::printf(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
        "t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   "
        "99.9%% percentile[usec]\n");
  }
}

void print_bw(const Options& o, const BwResult& r) {
  if (o.json) {
    json_begin(o, "bw");
    std::printf("\"bidirectional\":%s,\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64
                ",\"tx_depth\":%u,\"buffers\":%u,\"bw_peak_MBps\":%.2f,\"bw_avg_MBps\":%.2f,"
                "\"bw_avg_Gbps\":%.3f,\"msg_rate_Mpps\":%.6f,\"check_errors\":%" PRIu64 "}\n",
                o.bidir ? "true" : "false", r.size, r.iters, r.depth, o.check ? r.depth : o.buffers,
                r.peak_bps / kMB, r.avg_bps / kMB, r.avg_bps * 8e-9, r.msg_rate * 1e-6, r.errors);
  } else {
    std::printf(" %-7" PRIu64 "    %-7" PRIu64
                "        %-7.2f            %-7.2f              "
                "%-7.6f\n",
                r.size, r.iters, r.peak_bps / kMB, r.avg_bps / kMB, r.msg_rate * 1e-6);
  }
  end_row(r.errors, r.size);
}

void print_lat(const Options& o, const LatResult& r) {
  if (o.json) {
    json_begin(o, "lat");
    std::printf("\"bytes\":%" PRIu64 ",\"iterations\":%" PRIu64
                ",\"t_min_us\":%.3f,\"t_max_us\":%.3f,\"t_typical_us\":%.3f,\"t_avg_us\":%.3f,"
                "\"t_stdev_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"check_errors\":%" PRIu64
                "}\n",
                r.size, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999,
                r.errors);
  } else {
    std::printf(" %-7" PRIu64 " %-7" PRIu64
                "        %-7.2f        %-7.2f      %-7.2f          "
                "%-7.2f        %-7.2f          %-7.2f                %-7.2f\n",
                r.size, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
  }
  end_row(r.errors, r.size);
}

void print_footer(const Options& o) {
  if (!o.json) std::printf("%s\n", kRule);
  std::fflush(stdout);
}

}  // namespace gw::perf
