/// @file perf_options.h
/// gw-perf command line: perftest-like options (ib_send_bw / ib_send_lat) over any transport.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gw_status.h"
#include "gw_time.h"

namespace gw::perf {

enum class Test : uint8_t { kBw = 0, kLat = 1 };

struct Options {
  std::string transport = "tcp";  ///< spec for Transport::open
  int qps = 1;                    ///< rdma: queue pairs per connection (-q)
  std::string host;               ///< empty: server (rank 0); else the client dials it
  uint16_t port = 18515;          ///< TCP store port
  bool port_given = false;        ///< --port was on the command line
  int ranks = 0;                  ///< --ranks 2: fork both ranks on this host
  bool pin = false;               ///< --ranks 2: rank r on CPU r (mod the CPUs allowed)
  Test test = Test::kBw;
  bool bidir = false;
  std::vector<uint64_t> sizes;  ///< message sizes, in order
  uint64_t iters = 0;           ///< 0: perftest's default (bw 5000, lat 1000)
  double duration_s = 0;        ///< > 0: run each size for about this long
  uint64_t warmup = 0;          ///< 0: default (see perf_options.cc)
  uint32_t tx_depth = 128;      ///< outstanding sends in bw
  uint32_t rx_depth = 512;      ///< receives kept posted in bw (perftest's -r default)
  uint32_t buffers = 1;         ///< bw: message buffers cycled per side (--check: tx-depth)
  bool busy = false;            ///< spin in wait instead of sleeping on the driver's fd
  bool check = false;           ///< verify every byte received
  bool json = false;
  bool stats = false;  ///< print the transport's counters at the end (stderr)
  bool print_config = false;
  Millis timeout{10'000};  ///< every wait; a silent peer beyond it is an error
};

/// Parse argv. Returns the exit code to use right away (help, bad option) in `exit_code`
/// when it is >= 0; otherwise the options are ready.
Options parse_options(int argc, char** argv, int* exit_code);

/// "64", "4K", "1M", "2G" (powers of 1024). @return InvalidArgument naming the text.
Result<uint64_t> parse_size(std::string_view text);

/// Iterations for `test` when -n was not given.
uint64_t default_iters(Test test);

/// The largest size the run will use.
uint64_t max_size(const Options& o);

}  // namespace gw::perf
