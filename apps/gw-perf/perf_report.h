/// @file perf_report.h
/// Results and their printing: perftest's columns for people, one JSON object per size for
/// machines. Bandwidth is in MB/sec with MB = 2^20 bytes, perftest's default unit.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "gw_transport.h"
#include "perf_options.h"

namespace gw::perf {

struct BwResult {
  uint64_t size = 0;
  uint64_t iters = 0;
  double peak_bps = 0;  ///< bytes/s, best window of tx-depth messages (receive side)
  double avg_bps = 0;   ///< bytes/s over the whole timed phase
  double msg_rate = 0;  ///< messages/s (both directions with -b)
  uint32_t depth = 0;   ///< outstanding messages actually used
  uint64_t errors = 0;  ///< --check: bytes wrong, both ranks together
};

struct LatResult {
  uint64_t size = 0;
  uint64_t iters = 0;
  // Half round trips, microseconds.
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0;
  uint64_t errors = 0;
};

/// Best receive rate in bytes/s over any run of at least `min_msgs` messages and 16 MiB (a
/// shorter run measures how fast a full socket buffer is copied out, not the link), from
/// completion timestamps taken once per poll batch (a batch's messages arrived since the
/// previous one). 0 if the phase is shorter than one such run.
double peak_rate(std::span<const uint64_t> times_ns, size_t min_msgs, uint64_t size);

/// Statistics of round trips `rtt_ns` (sorted in place), reported as half round trips.
LatResult lat_stats(std::span<uint64_t> rtt_ns, uint64_t size);

/// Banner and column heads (nothing with --json).
/// The transport's counters, one "role: name value" line each, on stderr.
void print_stats(const char* role, const std::map<std::string, uint64_t>& stats);

void print_header(const Options& o, const TransportProperties& props, uint32_t depth,
                  uint32_t rx_depth);
void print_bw(const Options& o, const BwResult& r);
void print_lat(const Options& o, const LatResult& r);
/// Closing rule (nothing with --json).
void print_footer(const Options& o);

}  // namespace gw::perf
