// Bandwidth and latency through the plugin, as NCCL's proxy drives it (isend/irecv/test in a
// loop, at most NCCL_NET_MAX_REQUESTS in flight per comm). Rank 0 prints the rows; units as
// gw-perf's: MB = 2^20 bytes, latency = half round trip.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "harness_cases.h"

namespace gw::nccltest {
namespace {

constexpr int kBenchWaitMs = 30'000;

uint64_t ns_now() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count());
}

void* must_send(Net& net, void* sc, void* data, size_t n, int tag, void* mh) {
  for (;;) {
    void* req = nullptr;
    CHECK(net.isend(sc, data, n, tag, mh, &req) == ncclSuccess, "isend");
    if (req) return req;
  }
}

void* must_recv(Net& net, void* rc, void* data, size_t n, int tag, void* mh) {
  for (;;) {
    void* req = nullptr;
    size_t size = n;
    CHECK(net.irecv(rc, 1, &data, &size, &tag, &mh, &req) == ncclSuccess, "irecv");
    if (req) return req;
  }
}

}  // namespace

void bench_lat(Net& net, Mesh& m, const Ctx& ctx) {
  const int me = net.rank(), peer = 1 - me;
  std::vector<uint8_t> tx(4096, 1), rx(4096);
  void *tmh = nullptr, *rmh = nullptr;
  CHECK(net.reg_mr(m.send[peer], tx.data(), tx.size(), GW_NCCL_PTR_HOST, &tmh) == ncclSuccess &&
            net.reg_mr(m.recv[peer], rx.data(), rx.size(), GW_NCCL_PTR_HOST, &rmh) == ncclSuccess,
        "regMr");
  if (me == 0) {
    std::printf(
        " #bytes #iterations    t_min[usec]  t_typical[usec]    t_avg[usec]   "
        "99%% percentile[usec]\n");
  }
  for (size_t size = 8; size <= 4096; size *= 8) {
    const int iters = 2000, warm = 200;
    std::vector<uint64_t> rtt;
    rtt.reserve(iters);
    // As perftest and gw-perf: the echo side posts its next receive before it answers.
    void* next = me == 1 ? must_recv(net, m.recv[peer], rx.data(), size, 1, rmh) : nullptr;
    for (int i = 0; i < warm + iters; ++i) {
      uint64_t t0 = ns_now();
      if (me == 0) {
        void* r = must_recv(net, m.recv[peer], rx.data(), size, 1, rmh);
        void* s = must_send(net, m.send[peer], tx.data(), size, 1, tmh);
        CHECK(wait(net, r, nullptr, true, kBenchWaitMs) == ncclSuccess, "pong");
        CHECK(wait(net, s, nullptr, true, kBenchWaitMs) == ncclSuccess, "ping send");
        if (i >= warm) rtt.push_back(ns_now() - t0);
      } else {
        CHECK(wait(net, next, nullptr, true, kBenchWaitMs) == ncclSuccess, "ping");
        next =
            i + 1 < warm + iters ? must_recv(net, m.recv[peer], rx.data(), size, 1, rmh) : nullptr;
        void* s = must_send(net, m.send[peer], tx.data(), size, 1, tmh);
        CHECK(wait(net, s, nullptr, true, kBenchWaitMs) == ncclSuccess, "pong send");
      }
    }
    if (me == 0) {
      std::sort(rtt.begin(), rtt.end());
      double sum = 0;
      for (uint64_t v : rtt) sum += static_cast<double>(v);
      auto us = [](double ns) { return ns * 0.5e-3; };
      std::printf(" %-6zu %-11d %14.2f %16.2f %14.2f %22.2f\n", size, iters,
                  us(static_cast<double>(rtt.front())),
                  us(static_cast<double>(rtt[rtt.size() / 2])),
                  us(sum / static_cast<double>(rtt.size())),
                  us(static_cast<double>(rtt[rtt.size() * 99 / 100])));
      std::fflush(stdout);
    }
    if (size == 512) size = 4096 / 8;  // 8, 64, 512, 4096
  }
  CHECK(net.dereg_mr(m.send[peer], tmh) == ncclSuccess &&
            net.dereg_mr(m.recv[peer], rmh) == ncclSuccess,
        "deregMr");
  barrier(ctx.dir, "lat-done", me, ctx.ranks, kBenchWaitMs);
}

void bench_bw(Net& net, Mesh& m, const Ctx& ctx) {
  const int me = net.rank(), peer = 1 - me;
  constexpr int kDepth = GW_NCCL_MAX_REQUESTS;
  constexpr size_t kMax = 4 << 20;
  // GW_NCCL_BENCH_BUFFERS (default 1) message buffers cycled per side: the footprint must equal
  // the tool compared with (gw-perf --buffers N; 1 as perftest); NCCL's proxy cycles
  // NCCL_STEPS = 8 slots per connection.
  const char* nb = std::getenv("GW_NCCL_BENCH_BUFFERS");
  const int nbuf = std::clamp(nb ? std::atoi(nb) : 1, 1, kDepth);
  // Page-aligned, as NCCL's buffers (and gw-perf's, from the allocator, at some offset).
  const size_t bytes = kMax * static_cast<size_t>(nbuf);
  std::unique_ptr<uint8_t, decltype(&std::free)> mem(
      static_cast<uint8_t*>(std::aligned_alloc(4096, bytes)), &std::free);
  CHECK(mem != nullptr, "aligned_alloc");
  std::memset(mem.get(), 3, bytes);
  std::span<uint8_t> buf(mem.get(), bytes);
  void* mh = nullptr;
  void* comm = me == 0 ? m.send[peer] : m.recv[peer];
  CHECK(net.reg_mr(comm, buf.data(), buf.size(), GW_NCCL_PTR_HOST, &mh) == ncclSuccess, "regMr");
  uint8_t ack = 0;
  if (me == 0) {
    std::printf(" #bytes     #iterations    BW average[MB/sec]   MsgRate[Mpps]\n");
  }
  const char* env = std::getenv("GW_NCCL_BENCH_MIB");
  const size_t mib = env && std::atoi(env) > 0 ? static_cast<size_t>(std::atoi(env)) : 512;
  // GW_NCCL_BENCH_SIZE=N (a power of 4 times 64 KiB, up to 4 MiB) runs that size alone.
  const char* only = std::getenv("GW_NCCL_BENCH_SIZE");
  const size_t one = only ? std::strtoull(only, nullptr, 0) : 0;
  for (size_t size = 64 << 10; size <= kMax; size *= 4) {
    if (one != 0 && size != one) continue;
    // GW_NCCL_BENCH_MIB (default 512) MiB per size, at least 256 messages, after a warm-up
    // of 2 windows.
    const int iters = static_cast<int>(std::max<size_t>(256, (mib << 20) / size));
    auto stream = [&](int count) {  // keeps kDepth requests in flight, then drains
      std::deque<void*> q;
      for (int i = 0; i < count || !q.empty();) {
        if (i < count && static_cast<int>(q.size()) < kDepth) {
          uint8_t* p = buf.data() + static_cast<size_t>(i % nbuf) * size;
          q.push_back(me == 0 ? must_send(net, comm, p, size, 0, mh)
                              : must_recv(net, comm, p, size, 0, mh));
          ++i;
          continue;
        }
        int done = 0, got = 0;
        CHECK(net.test(q.front(), &done, &got) == ncclSuccess, "bw request failed");
        if (done) {
          CHECK(got == static_cast<int>(size), "bw: size %d, want %zu", got, size);
          q.pop_front();
        }
      }
    };
    stream(2 * kDepth);
    uint64_t t0 = ns_now();
    stream(iters);
    // Rank 1 acknowledges the last byte: rank 0's clock stops when everything arrived.
    if (me == 1) {
      void* r = must_send(net, m.send[peer], &ack, 1, 9, nullptr);
      CHECK(wait(net, r, nullptr, true, kBenchWaitMs) == ncclSuccess, "ack");
    } else {
      void* r = must_recv(net, m.recv[peer], &ack, 1, 9, nullptr);
      CHECK(wait(net, r, nullptr, true, kBenchWaitMs) == ncclSuccess, "ack");
      double s = static_cast<double>(ns_now() - t0) * 1e-9;
      double mb = static_cast<double>(size) * iters / (1024.0 * 1024.0);
      std::printf(" %-10zu %-14d %18.2f %17.6f\n", size, iters, mb / s, iters / s * 1e-6);
      std::fflush(stdout);
    }
  }
  CHECK(net.dereg_mr(comm, mh) == ncclSuccess, "deregMr");
  barrier(ctx.dir, "bw-done", me, ctx.ranks, kBenchWaitMs);
}

}  // namespace gw::nccltest
