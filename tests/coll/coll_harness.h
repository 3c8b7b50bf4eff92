// Multi-rank harness for the coll suite: ranks are threads, each with its own transport (the
// spec in GW_TEST_COLL_TRANSPORT, default TCP on loopback) and a Group over one in-process
// store; plus input generators and a float64 reference computed independently of the library.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gw_coll.h"
#include "gw_group.h"
#include "gw_store.h"
#include "gw_transport.h"

namespace gw::coll_test {

/// Small chunks so that modest sizes already cut every segment into several chunks.
inline constexpr int64_t kChunkBytes = 1024;

struct Rank {
  std::unique_ptr<Group> group;
  std::unique_ptr<Communicator> comm;
};

/// The transport every rank opens: GW_TEST_COLL_TRANSPORT, default TCP on loopback.
inline std::string transport_spec() {
  const char* s = std::getenv("GW_TEST_COLL_TRANSPORT");
  return s && *s ? s : "tcp:iface=lo";
}

/// `spec` with one more driver option ("tcp:iface=lo" + "cq_depth=16").
inline std::string with_option(const std::string& spec, const std::string& kv) {
  return spec + (spec.find(':') == std::string::npos ? ":" : ",") + kv;
}

/// Run fn(rank, comm) on `n` threads. The Communicator may be reset by fn (dead-peer tests).
/// host(rank), when given, names each rank's host (Group::create's `host`): a simulated
/// multi-host job on loopback. `spec`: the transport, default transport_spec().
inline void run_ranks(int n, CommOptions opts,
                      const std::function<void(int, std::unique_ptr<Rank>&)>& fn,
                      const std::function<std::string(int)>& host = {},
                      const std::string& spec = {}) {
  auto store = make_in_process_store();
  std::vector<std::thread> th;
  std::atomic<int> finished{0};
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto t = Transport::open(spec.empty() ? transport_spec() : spec);
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      auto g = Group::create(store, std::move(t).value(), r, n, Millis(20000), "coll",
                             host ? host(r) : std::string());
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      auto rk = std::make_unique<Rank>();
      rk->group = std::move(g).value();
      auto c = Communicator::create(*rk->group, opts);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      rk->comm = std::move(c).value();
      fn(r, rk);
      // Keep this rank's connections up until every rank is done (bounded): one that closed
      // first would turn a peer's own error (a mismatch) into "rank r closed" (RemoteError).
      // A rank that fn reset (a simulated death) has closed already.
      finished.fetch_add(1);
      for (auto t0 = Clock::now(); finished.load() < n && Clock::now() - t0 < Millis(2000);)
        std::this_thread::sleep_for(Millis(1));
      if (rk) rk->comm.reset();  // before its Group
    });
  }
  for (auto& t : th) t.join();
}

inline CommOptions small_chunks() {
  CommOptions o;
  o.chunk_bytes = kChunkBytes;
  o.pipeline_depth = 3;
  o.timeout = Millis(20000);
  return o;
}

// ---- independent encoders (GCC _Float16, bit truncation is exact for our inputs) ----------
inline double to_double(DataType dt, const uint8_t* p) {
  switch (dt) {
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DataType::kFloat16: {
      _Float16 v;
      std::memcpy(&v, p, 2);
      return static_cast<double>(v);
    }
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DataType::kUInt8:
      return *p;
  }
  return 0;
}

// Values used are exactly representable in every type (small multiples of 1/4).
inline void from_double(DataType dt, double x, uint8_t* p) {
  switch (dt) {
    case DataType::kFloat32: {
      float v = static_cast<float>(x);
      std::memcpy(p, &v, 4);
      return;
    }
    case DataType::kFloat64:
      std::memcpy(p, &x, 8);
      return;
    case DataType::kFloat16: {
      _Float16 v = static_cast<_Float16>(x);
      std::memcpy(p, &v, 2);
      return;
    }
    case DataType::kBFloat16: {
      uint16_t h = static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(x)) >> 16);
      std::memcpy(p, &h, 2);
      return;
    }
    case DataType::kInt32: {
      int32_t v = static_cast<int32_t>(x);
      std::memcpy(p, &v, 4);
      return;
    }
    case DataType::kInt64: {
      int64_t v = static_cast<int64_t>(x);
      std::memcpy(p, &v, 8);
      return;
    }
    case DataType::kUInt8:
      *p = static_cast<uint8_t>(x);
      return;
  }
}

inline bool is_int(DataType dt) {
  return dt == DataType::kInt32 || dt == DataType::kInt64 || dt == DataType::kUInt8;
}

/// Input of `rank` at element i: chosen so that sums, products (of up to 8 ranks), minima and
/// maxima are exact in every dtype — any reduction order then gives the exact result.
inline double input_value(DataType dt, ReduceOp op, int rank, size_t i) {
  const size_t h = i * 2654435761u + static_cast<size_t>(rank) * 40503u + 17;
  if (op == ReduceOp::kProd) {
    static const double kFloat[] = {1, -1, 2, 0.5, -2, 1};
    static const double kInt[] = {1, -1, 2, -2, 3, 1};
    if (dt == DataType::kUInt8) return 1 + static_cast<double>(h % 2);  // 2^8 wraps to 0
    return (is_int(dt) ? kInt : kFloat)[h % 6];
  }
  if (dt == DataType::kUInt8) return static_cast<double>(h % 21);
  if (is_int(dt)) return static_cast<double>(h % 41) - 20;
  return (static_cast<double>(h % 33) - 16) / 4;
}

inline std::vector<uint8_t> make_input(DataType dt, ReduceOp op, int rank, size_t count) {
  std::vector<uint8_t> v(count * dtype_size(dt));
  for (size_t i = 0; i < count; ++i)
    from_double(dt, input_value(dt, op, rank, i), v.data() + i * dtype_size(dt));
  return v;
}

/// Float64 reference of element i over ranks [0, n).
inline double reference(DataType dt, ReduceOp op, int n, size_t i) {
  double acc = input_value(dt, op, 0, i);
  for (int r = 1; r < n; ++r) {
    double x = input_value(dt, op, r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += x;
        break;
      case ReduceOp::kProd:
        acc *= x;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, x);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, x);
        break;
    }
  }
  if (dt == DataType::kUInt8) acc = std::fmod(acc, 256.0);  // wraps modulo 2^8
  if (op == ReduceOp::kAvg) acc = is_int(dt) ? std::trunc(acc / n) : acc / n;
  return acc;
}

/// Tolerance: exact except the final division of avg, which rounds once in the element type
/// (float16/bfloat16: in float32 and once more to the narrow type).
inline double tolerance(DataType dt, ReduceOp op, double ref) {
  if (op != ReduceOp::kAvg || is_int(dt)) return 0;
  double rel = dt == DataType::kFloat64   ? 0x1p-52
               : dt == DataType::kFloat32 ? 0x1p-23
               : dt == DataType::kFloat16 ? 0x1p-10
                                          : 0x1p-7;
  return std::fabs(ref) * rel + (dt == DataType::kFloat16 ? 0x1p-24 : 0);
}

/// Check element by element; returns the number of wrong elements (reports the first few).
inline size_t check_result(DataType dt, ReduceOp op, int n, const uint8_t* got, size_t count,
                           const std::string& what) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double ref = reference(dt, op, n, i);
    double g = to_double(dt, got + i * dtype_size(dt));
    if (!(std::fabs(g - ref) <= tolerance(dt, op, ref))) {
      if (++wrong <= 3)
        ADD_FAILURE() << what << ": element " << i << " = " << g << ", expected " << ref;
    }
  }
  return wrong;
}

}  // namespace gw::coll_test
