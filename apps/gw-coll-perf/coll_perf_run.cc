// gw-coll-perf: one rank's measurement loop. Every size: an optional checked run (#wrong summed
// over ranks), -w warm-up runs, then -n timed runs; rank 0 prints the slowest rank's time.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "coll_perf.h"
#include "gw_config.h"
#include "gw_device.h"
#include "gw_group.h"
#include "gw_store.h"
#include "reduce_kernels.h"

namespace gw::collperf {
namespace {

struct Free {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buf = std::unique_ptr<uint8_t, Free>;

Buf alloc(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (p) std::memset(p, 0, bytes);
  return Buf(p);
}

bool is_int(DataType dt) {
  return dt == DataType::kInt32 || dt == DataType::kInt64 || dt == DataType::kUInt8;
}

// Inputs exact in every dtype, so sums/products/min/max have one right answer.
double value(const Options& o, int rank, size_t i) {
  const size_t h = (i * 7 + static_cast<size_t>(rank) * 3) % 17;
  if (o.op == ReduceOp::kProd) return o.dtype == DataType::kUInt8 ? 1 : (h % 3 == 0 ? -1 : 1);
  if (o.dtype == DataType::kUInt8) return static_cast<double>(h);
  return is_int(o.dtype) ? static_cast<double>(h) - 8 : (static_cast<double>(h) - 8) / 4;
}

void store_value(DataType dt, double x, uint8_t* p) {
  switch (dt) {
    case DataType::kFloat32: {
      float v = static_cast<float>(x);
      std::memcpy(p, &v, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(p, &x, 8);
      break;
    case DataType::kFloat16: {
      uint16_t v = coll::float_to_half(static_cast<float>(x));
      std::memcpy(p, &v, 2);
      break;
    }
    case DataType::kBFloat16: {
      uint16_t v = coll::float_to_bf16(static_cast<float>(x));
      std::memcpy(p, &v, 2);
      break;
    }
    case DataType::kInt32: {
      int32_t v = static_cast<int32_t>(x);
      std::memcpy(p, &v, 4);
      break;
    }
    case DataType::kInt64: {
      int64_t v = static_cast<int64_t>(x);
      std::memcpy(p, &v, 8);
      break;
    }
    case DataType::kUInt8:
      *p = static_cast<uint8_t>(x);
      break;
  }
}

double load_value(DataType dt, const uint8_t* p) {
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
      uint16_t v;
      std::memcpy(&v, p, 2);
      return coll::half_to_float(v);
    }
    case DataType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return coll::bf16_to_float(v);
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

double reduced(const Options& o, int n, size_t i) {
  double acc = value(o, 0, i);
  for (int r = 1; r < n; ++r) {
    const double x = value(o, r, i);
    switch (o.op) {
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
  if (o.dtype == DataType::kUInt8) acc = std::fmod(acc, 256.0);
  if (o.op == ReduceOp::kAvg) acc = is_int(o.dtype) ? std::trunc(acc / n) : acc / n;
  return acc;
}

struct Size {
  size_t bytes = 0, count = 0;  // count: elements of the whole buffer (nccl-tests' "count")
};

class Bench {
 public:
  Bench(const Options& o, Communicator& c)
      : o_(o),
        c_(c),
        n_(c.size()),
        r_(c.rank()),
        counts_(static_cast<size_t>(n_)),
        displs_(static_cast<size_t>(n_)) {
    bruck_max_ = limit(o.bruck_max_bytes, "coll.alltoall_bruck_max_bytes");
    tree_max_ = limit(o.tree_max_bytes, "coll.gather_tree_max_bytes");
  }

  Status run() {
    const size_t es = dtype_size(o_.dtype);
    send_ = alloc(o_.max_bytes + es);
    recv_ = alloc(o_.max_bytes + es);
    if (!send_ || !recv_) return Status(Code::kResourceExhausted, "cannot allocate 2 x -e bytes");
    if (o_.device) {
      GW_ASSIGN_OR_RETURN(dsend_, DeviceBuffer::create(o_.max_bytes + es));
      GW_ASSIGN_OR_RETURN(drecv_, DeviceBuffer::create(o_.max_bytes + es));
    }
    if (r_ == 0) header();
    for (uint64_t s = o_.min_bytes; s <= o_.max_bytes;
         s = o_.step_bytes
                 ? s + o_.step_bytes
                 : std::max<uint64_t>(s + 1, static_cast<uint64_t>(std::ceil(s * o_.factor)))) {
      const size_t unit = es * (o_.coll == Coll::kAllreduce || o_.coll == Coll::kBroadcast
                                    ? 1
                                    : static_cast<size_t>(n_));
      Size sz;
      sz.count = s / unit * (unit / es);
      sz.bytes = sz.count * es;
      if (sz.bytes == 0 && s != 0) continue;
      GW_RETURN_IF_ERROR(one_size(sz));
    }
    return Status();
  }

 private:
  // The option, or (negative) the key as the communicator read it: the algo column.
  static size_t limit(int64_t given, const char* key) {
    if (given >= 0) return static_cast<size_t>(given);
    auto cfg = Config::global();
    auto v = cfg.ok() ? cfg->get_int(key) : Result<int64_t>(0);
    return v.ok() ? static_cast<size_t>(*v) : 0;
  }
  size_t block(const Size& s) const { return s.count / static_cast<size_t>(n_); }
  uint8_t* in_ptr(const Size& s) {
    if (!o_.in_place) return send_.get();
    if (o_.coll == Coll::kAllgather)
      return recv_.get() + static_cast<size_t>(r_) * block(s) * dtype_size(o_.dtype);
    return recv_.get();
  }

  // Host buffers are filled and checked; with --device the collective runs on device copies.
  uint8_t* dev(uint8_t* host) {
    if (!o_.device) return host;
    uint8_t* r = recv_.get();
    if (host >= r && host < r + drecv_.size()) return drecv_.get() + (host - r);
    return dsend_.get() + (host - send_.get());
  }
  Status copy(void* dst, const void* src, size_t n) {
    GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
    GW_RETURN_IF_ERROR(ops->copy_async(dst, src, n, nullptr));
    return ops->synchronize(nullptr);
  }

  Status start_wait(const Size& s) {
    CallOptions call{.algo = o_.algo, .timeout = Millis(o_.timeout_ms)};
    switch (o_.coll) {
      case Coll::kAllreduce:
        return c_.allreduce(dev(in_ptr(s)), dev(recv_.get()), s.count, o_.dtype, o_.op, call);
      case Coll::kReduceScatter:
        return c_.reduce_scatter(in_ptr(s), recv_.get(), block(s), o_.dtype, o_.op, call);
      case Coll::kAllgather:
        return c_.allgather(in_ptr(s), recv_.get(), block(s), o_.dtype, call);
      case Coll::kBroadcast:
        return c_.broadcast(recv_.get(), s.count, o_.dtype, o_.root, call);
      case Coll::kAlltoall:
        return c_.alltoall(send_.get(), recv_.get(), block(s), o_.dtype, call);
      case Coll::kGather:
        return c_.gather(send_.get(), recv_.get(), block(s), o_.dtype, o_.root, call);
      case Coll::kScatter:
        return c_.scatter(send_.get(), recv_.get(), block(s), o_.dtype, o_.root, call);
      case Coll::kAlltoallv:
        if (counts_[0] != block(s)) {  // once per size, not per call
          for (size_t j = 0; j < counts_.size(); ++j) {
            counts_[j] = block(s);
            displs_[j] = j * block(s);
          }
        }
        return c_.alltoallv(send_.get(), counts_.data(), displs_.data(), recv_.get(),
                            counts_.data(), displs_.data(), o_.dtype, call);
    }
    return Status();
  }

  // Elements this rank contributes, and receives (nccl-tests' sizes: the whole buffer).
  size_t in_count(const Size& s) const {
    const bool root = r_ == o_.root;
    switch (o_.coll) {
      case Coll::kAllgather:
      case Coll::kGather:
        return block(s);
      case Coll::kScatter:
        return root ? s.count : 0;
      default:
        return s.count;
    }
  }
  size_t out_count(const Size& s) const {
    switch (o_.coll) {
      case Coll::kReduceScatter:
      case Coll::kScatter:
        return block(s);
      case Coll::kGather:
        return r_ == o_.root ? s.count : 0;
      default:
        return s.count;
    }
  }
  // Element i of this rank's result.
  double expected(const Size& s, size_t i) const {
    const size_t b = block(s), me = static_cast<size_t>(r_);
    switch (o_.coll) {
      case Coll::kAllreduce:
        return reduced(o_, n_, i);
      case Coll::kReduceScatter:
        return reduced(o_, n_, me * b + i);
      case Coll::kAllgather:
      case Coll::kGather:
        return value(o_, static_cast<int>(i / b), i % b);
      case Coll::kAlltoall:  // block p came from rank p, which sent its block r_
      case Coll::kAlltoallv:
        return value(o_, static_cast<int>(i / b), me * b + i % b);
      case Coll::kScatter:
        return value(o_, o_.root, me * b + i);
      case Coll::kBroadcast:
        break;
    }
    return value(o_, o_.root, i);
  }

  // Fill, run once, count wrong elements on this rank.
  Result<int64_t> check(const Size& s) {
    const size_t es = dtype_size(o_.dtype), ic = in_count(s), oc = out_count(s);
    uint8_t* in = o_.coll == Coll::kBroadcast ? recv_.get() : in_ptr(s);
    for (size_t i = 0; i < ic; ++i) store_value(o_.dtype, value(o_, r_, i), in + i * es);
    if (o_.device) GW_RETURN_IF_ERROR(copy(dev(in), in, ic * es));
    GW_RETURN_IF_ERROR(start_wait(s));
    if (o_.device) GW_RETURN_IF_ERROR(copy(recv_.get(), drecv_.get(), oc * es));
    int64_t wrong = 0;
    for (size_t i = 0; i < oc; ++i) {
      const double want = expected(s, i);
      const double got = load_value(o_.dtype, recv_.get() + i * es);
      const double tol = o_.op == ReduceOp::kAvg && !is_int(o_.dtype) ? std::fabs(want) * 1e-2 : 0;
      if (!(std::fabs(got - want) <= tol)) ++wrong;
    }
    return wrong;
  }

  Status one_size(const Size& s) {
    int64_t wrong = 0;
    if (o_.check) {
      GW_ASSIGN_OR_RETURN(wrong, check(s));
      GW_RETURN_IF_ERROR(c_.allreduce(&wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum));
    }
    for (int i = 0; i < o_.warmup; ++i) GW_RETURN_IF_ERROR(start_wait(s));
    GW_RETURN_IF_ERROR(c_.barrier());
    const auto t0 = Clock::now();
    for (int i = 0; i < o_.iters; ++i) GW_RETURN_IF_ERROR(start_wait(s));
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o_.iters;
    GW_RETURN_IF_ERROR(c_.allreduce(&us, &us, 1, DataType::kFloat64, ReduceOp::kMax));
    if (r_ == 0) row(s, us, o_.check ? wrong : -1);
    if (wrong > 0) {  // as nccl-tests: a wrong result fails the run, not only its row
      return Status(Code::kInternal, std::string(coll_name(o_.coll)) + " of " +
                                         std::to_string(s.bytes) + " B: " + std::to_string(wrong) +
                                         " wrong elements over all ranks");
    }
    return Status();
  }

  double bus_factor() const {
    const double n = n_;
    switch (o_.coll) {
      case Coll::kAllreduce:
        return 2 * (n - 1) / n;
      case Coll::kReduceScatter:
      case Coll::kAllgather:
      case Coll::kAlltoall:  // nccl-tests: each rank sends and receives (n-1)/n of its bytes
      case Coll::kAlltoallv:
      case Coll::kGather:
      case Coll::kScatter:
        return (n - 1) / n;
      case Coll::kBroadcast:
        return 1;
    }
    return 1;
  }

  const char* algo_of(const Size& s) const {
    if (o_.coll == Coll::kAlltoallv) return "pair";
    if (o_.coll == Coll::kAlltoall) {
      const size_t b = block(s) * dtype_size(o_.dtype);
      return n_ > 2 && b <= bruck_max_ ? "bruck" : "pair";
    }
    if (o_.coll == Coll::kGather || o_.coll == Coll::kScatter) {
      const size_t b = block(s) * dtype_size(o_.dtype);
      return n_ > 2 && b > 0 && b <= tree_max_ ? "tree" : "direct";
    }
    if (o_.coll != Coll::kAllreduce) return o_.coll == Coll::kBroadcast ? "chain" : "ring";
    Algo a = o_.algo == Algo::kAuto ? c_.choose_algo(s.bytes) : o_.algo;
    return n_ == 1 ? "local" : algo_name(a);
  }

  void header() {
    if (o_.json) return;
    std::printf("# gw-coll-perf: %s, %d rank(s), %s, op %s, algo %s, kernels %s\n",
                coll_name(o_.coll), n_, dtype_name(o_.dtype), op_name(o_.op), algo_name(o_.algo),
                coll::reduce_target_name());
    std::printf("#%11s %12s %9s %6s %10s %8s %8s %7s %6s\n", "size", "count", "type", "redop",
                "time", "algbw", "busbw", "#wrong", "algo");
    std::printf("#%11s %12s %9s %6s %10s %8s %8s %7s %6s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "");
  }

  void row(const Size& s, double us, int64_t wrong) {
    const double algbw = us > 0 ? static_cast<double>(s.bytes) / us / 1e3 : 0;
    const double busbw = algbw * bus_factor();
    const char* redop =
        o_.coll == Coll::kAllreduce || o_.coll == Coll::kReduceScatter ? op_name(o_.op) : "none";
    if (o_.json) {
      std::printf(
          "{\"coll\":\"%s\",\"ranks\":%d,\"size\":%zu,\"count\":%zu,\"type\":\"%s\","
          "\"redop\":\"%s\",\"algo\":\"%s\",\"time_us\":%.2f,\"algbw_gbps\":%.4f,"
          "\"busbw_gbps\":%.4f,\"wrong\":%lld}\n",
          coll_name(o_.coll), n_, s.bytes, s.count, dtype_name(o_.dtype), redop, algo_of(s), us,
          algbw, busbw, static_cast<long long>(wrong));
    } else {
      std::printf(" %11zu %12zu %9s %6s %10.2f %8.3f %8.3f %7s %6s\n", s.bytes, s.count,
                  dtype_name(o_.dtype), redop, us, algbw, busbw,
                  wrong < 0 ? "N/A" : std::to_string(wrong).c_str(), algo_of(s));
    }
    std::fflush(stdout);
  }

  const Options& o_;
  Communicator& c_;
  int n_, r_;
  size_t bruck_max_ = 0, tree_max_ = 0;
  Buf send_, recv_;
  DeviceBuffer dsend_, drecv_;
  std::vector<size_t> counts_, displs_;  // alltoallv: equal parts, set per size
};

int fail(int rank, const Status& st) {
  std::fprintf(stderr, "gw-coll-perf: rank %d: %s\n", rank, st.to_string().c_str());
  return 1;
}

}  // namespace

int run_rank(const Options& opt) {
  const Nanos timeout = Millis(opt.timeout_ms);
  std::shared_ptr<Store> store;
  int rank = 0, world = 1;
  auto launch = discover_launch();
  if (launch.ok()) {
    rank = launch->rank;
    world = launch->world_size;
    auto s = store_for_launch(*launch, timeout);
    if (!s.ok()) return fail(rank, s.status());
    store = *s;
  } else if (launch.status().code() == Code::kUnavailable) {
    store = make_in_process_store();  // no launcher: one rank
  } else {
    return fail(rank, launch.status());
  }
  std::string spec = opt.transport;
  if (spec.empty()) {
    auto cfg = Config::global();
    if (!cfg.ok()) return fail(rank, cfg.status());
    spec = cfg->get_string("transport.default").value();
  }
  auto t = Transport::open(spec);
  if (!t.ok()) return fail(rank, t.status());
  auto g = Group::create(store, std::move(*t), rank, world, timeout, "gw-coll-perf");
  if (!g.ok()) return fail(rank, g.status());
  CommOptions co;
  co.chunk_bytes = opt.chunk_bytes;
  co.rd_max_bytes = opt.rd_max_bytes;
  co.alltoall_bruck_max_bytes = opt.bruck_max_bytes;
  co.gather_tree_max_bytes = opt.tree_max_bytes;
  co.timeout = timeout;
  auto c = Communicator::create(**g, co);
  if (!c.ok()) return fail(rank, c.status());
  Bench bench(opt, **c);
  Status st = bench.run();
  if (!st.ok()) return fail(rank, st);
  if (opt.idle_s > 0) {
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(opt.idle_s));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    st = (*c)->barrier();  // the connections lived through it
    if (!st.ok()) return fail(rank, st);
    if (rank == 0) {
      std::printf("%12d %12s %9.3f  # no call meanwhile; progress thread: %s\n", 0, "idle", s,
                  (*g)->transport().background() ? "on" : "off");
      std::fflush(stdout);
    }
  }
  // Leave together: a rank that exits early is not mistaken for a failure by a slower one.
  st = (*c)->barrier();
  return st.ok() ? 0 : fail(rank, st);
}

}  // namespace gw::collperf
