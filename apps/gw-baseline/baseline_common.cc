#include "baseline_common.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gwb {
namespace {

uint64_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<uint64_t>(v);
}

}  // namespace

Options parse(int argc, char** argv, const char* usage) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n%s", argv[0], a.c_str(), usage);
      std::exit(2);
    }
    const char* v = argv[++i];
    if (a == "-b")
      o.min_bytes = parse_size(v);
    else if (a == "-e")
      o.max_bytes = parse_size(v);
    else if (a == "-f")
      o.factor = std::atof(v);
    else if (a == "-n")
      o.iters = std::atoi(v);
    else if (a == "-w")
      o.warmup = std::atoi(v);
    else if (a == "--ranks")
      o.ranks = std::atoi(v);
    else if (a == "--algo")
      o.algo = v;
    else if (a == "--coll")
      o.coll = v;
    else {
      std::fprintf(stderr, "%s: unknown option %s\n%s", argv[0], a.c_str(), usage);
      std::exit(2);
    }
  }
  if (o.factor <= 1 || o.iters < 1 || o.warmup < 0 || o.ranks < 1 || o.min_bytes < 4 ||
      o.max_bytes < o.min_bytes) {
    std::fprintf(stderr, "%s: bad option values\n%s", argv[0], usage);
    std::exit(2);
  }
  return o;
}

std::vector<uint64_t> sizes(const Options& o) {
  std::vector<uint64_t> out;
  for (double s = static_cast<double>(o.min_bytes); s <= static_cast<double>(o.max_bytes);
       s *= o.factor) {
    out.push_back(static_cast<uint64_t>(s) / 4 * 4);
  }
  return out;
}

void fill(std::vector<float>& v, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank + 1) * (i % 13 + 1));
}

long long count_wrong(const std::vector<float>& v, size_t count, int n) {
  long long wrong = 0;
  const double ranks = n * (n + 1) / 2.0;
  for (size_t i = 0; i < count; ++i) {
    if (static_cast<double>(v[i]) != ranks * static_cast<double>(i % 13 + 1)) ++wrong;
  }
  return wrong;
}

float a2a_value(int p, size_t j) { return static_cast<float>((p + 1) * 8192 + j % 8191); }

long long a2a_wrong(const std::vector<float>& v, size_t block, int n, int me) {
  long long wrong = 0;
  for (int p = 0; p < n; ++p) {  // block p came from rank p, which sent its block `me`
    for (size_t i = 0; i < block; ++i) {
      if (v[p * block + i] != a2a_value(p, static_cast<size_t>(me) * block + i)) ++wrong;
    }
  }
  return wrong;
}

void print_header(const char* who, const char* coll) {
  const bool a2a = std::strcmp(coll, "alltoall") == 0;
  std::printf("# %s %s, float32%s, TCP loopback\n", who, coll, a2a ? "" : " sum");
  std::printf("# %10s %12s %9s %6s %10s %8s %8s %7s %6s\n", "size", "count", "type", "redop",
              "time", "algbw", "busbw", "#wrong", "algo");
  std::printf("# %10s %12s %9s %6s %10s %8s %8s %7s %6s\n", "(B)", "(elements)", "", "", "(us)",
              "(GB/s)", "(GB/s)", "", "");
}

void print_row(uint64_t bytes, double us, int n, long long wrong, const std::string& algo,
               const char* coll) {
  const bool a2a = std::strcmp(coll, "alltoall") == 0;
  const double algbw = static_cast<double>(bytes) / us / 1e3;
  const double busbw = algbw * (a2a ? 1.0 : 2.0) * (n - 1) / n;
  std::printf("  %10llu %12llu %9s %6s %10.2f %8.3f %8.3f %7lld %6s\n",
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(bytes / 4),
              "float32", a2a ? "none" : "sum", us, algbw, busbw, wrong, algo.c_str());
  std::fflush(stdout);
}

}  // namespace gwb
