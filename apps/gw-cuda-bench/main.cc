// gw-cuda-bench: on one GPU, (1) the reduction kernels' effective bandwidth, 3 x bytes / time
// (two operands read, one result written), beside device-to-device copy bandwidth, 2 x bytes /
// time (one read, one write) measured the same way; (2) allreduce of device buffers beside the
// same allreduce of host buffers, ranks as threads over one transport spec (TCP loopback by
// default). Prints one table per part; exit status 1 with the reason when there is no GPU.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "coll_device.h"
#include "gw_coll.h"
#include "gw_device.h"
#include "gw_group.h"
#include "gw_store.h"

namespace gw {
namespace {

using Sec = std::chrono::duration<double>;

template <class F>
double time_it(int iters, DeviceOps* ops, DeviceStream s, F f) {
  f();  // warm-up
  (void)ops->synchronize(s);
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  (void)ops->synchronize(s);
  return Sec(Clock::now() - t0).count() / iters;
}

int kernels(size_t bytes, int iters) {
  DeviceOps* ops = device_ops().value();
  auto a = DeviceBuffer::create(bytes), b = DeviceBuffer::create(bytes),
       d = DeviceBuffer::create(bytes);
  auto s = StreamHandle::create();
  if (!a.ok() || !b.ok() || !d.ok() || !s.ok()) {
    std::fprintf(stderr, "gw-cuda-bench: cannot allocate 3 x %zu bytes on the GPU\n", bytes);
    return 1;
  }
  const double copy = time_it(iters, ops, s->get(),
                              [&] { (void)ops->copy_async(d->get(), a->get(), bytes, s->get()); });
  std::printf("# %s\n# %zu MiB per operand, %d iterations\n", ops->describe().c_str(), bytes >> 20,
              iters);
  std::printf("%-10s %-5s %12s %12s %8s\n", "dtype", "op", "GB/s(3xB)", "copy GB/s", "ratio");
  const double copy_bw = 2.0 * static_cast<double>(bytes) / copy / 1e9;
  for (DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                      DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      const size_t n = bytes / dtype_size(dt);
      Status st;
      const double t = time_it(iters, ops, s->get(), [&] {
        st = ops->reduce(dt, op, d->get(), a->get(), b->get(), n, 3, s->get());
      });
      if (!st.ok()) {
        std::fprintf(stderr, "gw-cuda-bench: %s\n", st.to_string().c_str());
        return 1;
      }
      const double bw = 3.0 * static_cast<double>(bytes) / t / 1e9;
      std::printf("%-10s %-5s %12.1f %12.1f %8.2f\n", dtype_name(dt), op_name(op), bw, copy_bw,
                  bw / copy_bw);
    }
  }
  return 0;
}

// Seconds per allreduce of `bytes` float32 on every rank, device or host buffers.
double allreduce(const std::string& spec, int ranks, size_t bytes, bool device, int iters) {
  auto store = make_in_process_store();
  std::vector<double> secs(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r) {
    th.emplace_back([&, r] {
      auto t = Transport::open(spec);
      if (!t.ok()) return (void)std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
      auto g = Group::create(store, std::move(t).value(), r, ranks, Millis(30000), "cuda-bench");
      if (!g.ok()) return (void)std::fprintf(stderr, "%s\n", g.status().to_string().c_str());
      auto c = Communicator::create(**g);
      if (!c.ok()) return (void)std::fprintf(stderr, "%s\n", c.status().to_string().c_str());
      std::vector<uint8_t> host(bytes, 0);
      auto dev = DeviceBuffer::create(bytes);
      void* buf = device ? static_cast<void*>(dev->get()) : host.data();
      const size_t n = bytes / 4;
      Status st = (*c)->allreduce(buf, buf, n, DataType::kFloat32, ReduceOp::kSum);
      auto t0 = Clock::now();
      for (int i = 0; i < iters && st.ok(); ++i)
        st = (*c)->allreduce(buf, buf, n, DataType::kFloat32, ReduceOp::kSum);
      if (!st.ok()) std::fprintf(stderr, "rank %d: %s\n", r, st.to_string().c_str());
      secs[static_cast<size_t>(r)] = st.ok() ? Sec(Clock::now() - t0).count() / iters : -1;
      c->reset();
    });
  }
  for (auto& t : th) t.join();
  double worst = 0;
  for (double s : secs) worst = s < 0 ? -1 : std::max(worst, s);
  return worst;
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) {
  CLI::App app{"gw-cuda-bench: CUDA reduction kernels and device-buffer allreduce"};
  size_t mib = 256, max_mib = 64;
  int iters = 20, ranks = 2;
  std::string spec = "tcp:iface=lo";
  app.add_option("--kernel-mib", mib, "MiB per operand of the kernel test");
  app.add_option("--max-mib", max_mib, "largest allreduce, MiB (from 1 MiB, x4)");
  app.add_option("-n,--iters", iters, "iterations per measurement");
  app.add_option("--ranks", ranks, "ranks (threads) of the allreduce");
  app.add_option("-t,--transport", spec, "transport spec of the allreduce");
  CLI11_PARSE(app, argc, argv);
  auto ops = gw::device_ops();
  if (!ops.ok()) {
    std::fprintf(stderr, "gw-cuda-bench: %s\n", ops.status().to_string().c_str());
    return 1;
  }
  if (gw::kernels(mib << 20, iters) != 0) return 1;
  std::printf("\n# allreduce float32 sum, %d ranks over %s (algbw = bytes / time)\n", ranks,
              spec.c_str());
  std::printf("%10s %14s %14s %8s\n", "bytes", "device GB/s", "host GB/s", "ratio");
  for (size_t m = 1; m <= max_mib; m *= 4) {
    const size_t bytes = m << 20;
    const double d = gw::allreduce(spec, ranks, bytes, true, iters);
    const double h = gw::allreduce(spec, ranks, bytes, false, iters);
    if (d < 0 || h < 0) return 1;
    std::printf("%10zu %14.2f %14.2f %8.2f\n", bytes, bytes / d / 1e9, bytes / h / 1e9, h / d);
  }
  return 0;
}
