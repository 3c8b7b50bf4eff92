// gw-reduce-bench: the reduction kernels beside memcpy of the same bytes (Google Benchmark).
// bytes_per_second counts every byte read and written: memcpy moves 2 S (read S, write S), a
// reduction dst = a op b moves 3 S. Sizes: in cache (256 KiB) and far past the LLC (64 MiB).
// Usage: gw-reduce-bench [--benchmark_filter=...] [--benchmark_min_time=...]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "reduce_kernels.h"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buf = std::unique_ptr<uint8_t, FreeDeleter>;

Buf alloc(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  std::memset(p, 1, bytes);  // fault pages in, small values (no overflow to inf)
  return Buf(p);
}

void bm_memcpy(benchmark::State& st) {
  const size_t bytes = static_cast<size_t>(st.range(0));
  Buf src = alloc(bytes), dst = alloc(bytes);
  for (auto _ : st) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * 2 * bytes));
}

// In place, as the ring uses it: acc = acc op incoming.
void bm_reduce(benchmark::State& st, gw::DataType dt, gw::ReduceOp op) {
  const size_t bytes = static_cast<size_t>(st.range(0));
  const size_t count = bytes / gw::dtype_size(dt);
  Buf acc = alloc(bytes), in = alloc(bytes);
  for (auto _ : st) {
    gw::coll::reduce(dt, op, acc.get(), acc.get(), in.get(), count);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * 3 * bytes));
  st.SetLabel(gw::coll::reduce_target_name());
}

constexpr int64_t kSmall = 256 << 10;
constexpr int64_t kLarge = 64 << 20;

int register_all() {
  benchmark::RegisterBenchmark("memcpy", bm_memcpy)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
  for (int t = 0; t < gw::kNumDataTypes; ++t) {
    auto dt = static_cast<gw::DataType>(t);
    for (int o = 0; o < gw::kNumReduceOps; ++o) {
      auto op = static_cast<gw::ReduceOp>(o);
      // Every op for float32; sum for the other types keeps the default run short.
      if (dt != gw::DataType::kFloat32 && op != gw::ReduceOp::kSum) continue;
      std::string name = std::string("reduce/") + gw::dtype_name(dt) + "/" + gw::op_name(op);
      benchmark::RegisterBenchmark(name.c_str(), bm_reduce, dt, op)
          ->Arg(kSmall)
          ->Arg(kLarge)
          ->UseRealTime();
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
