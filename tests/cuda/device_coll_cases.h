/// @file device_coll_cases.h
/// Every collective on device buffers, written against the DeviceOps table only, so the same
/// cases run on the emulated table (test_device_coll.cc, CI) and on CUDA (test_cuda.cc). Ranks
/// are threads (tests/coll/coll_harness.h) over the transport of GW_TEST_COLL_TRANSPORT; every
/// result is checked element by element on every rank against the harness's float64 reference.
/// Thread-safety: the table is shared by the rank threads (it is thread-safe).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "coll_harness.h"
#include "staging_cases.h"

namespace gw::cuda_test {

using coll_test::Rank;

inline constexpr DataType kAllTypes[] = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};

/// Small chunks; recursive doubling up to 256 B, host-staged up to 1 KiB, the device ring
/// above: the sizes below take every path.
inline CommOptions device_opts() {
  CommOptions o = coll_test::small_chunks();
  o.rd_max_bytes = 256;
  o.device_host_max_bytes = 1024;
  return o;
}

/// Input of `rank` for elements [first, first + count) of a vector.
inline std::vector<uint8_t> input_at(DataType dt, ReduceOp op, int rank, size_t first,
                                     size_t count) {
  std::vector<uint8_t> v(count * dtype_size(dt));
  for (size_t i = 0; i < count; ++i)
    coll_test::from_double(dt, coll_test::input_value(dt, op, rank, first + i),
                           v.data() + i * dtype_size(dt));
  return v;
}

/// Checks got[i] against the reference of element first + i. @return wrong elements.
inline size_t check_at(DataType dt, ReduceOp op, int n, const std::vector<uint8_t>& got,
                       size_t first, size_t count, const std::string& what) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double ref = coll_test::reference(dt, op, n, first + i);
    const double g = coll_test::to_double(dt, got.data() + i * dtype_size(dt));
    if (!(std::fabs(g - ref) <= coll_test::tolerance(dt, op, ref)) && ++wrong <= 3)
      ADD_FAILURE() << what << ": element " << first + i << " = " << g << ", expected " << ref;
  }
  return wrong;
}

inline std::string what(const char* coll, DataType dt, ReduceOp op, size_t count, int r) {
  return std::string(coll) + " " + dtype_name(dt) + " " + op_name(op) + " count " +
         std::to_string(count) + " rank " + std::to_string(r);
}

inline std::vector<ReduceOp> ops_for(DataType dt) {
  if (dt == DataType::kFloat32 || dt == DataType::kInt32)
    return {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg};
  return {ReduceOp::kSum};
}

/// Allreduce (out of place and in place), every path: rd, host-staged ring, device ring.
inline void device_allreduce_cases(DeviceOps* ops, int n) {
  coll_test::run_ranks(n, device_opts(), [&](int r, std::unique_ptr<Rank>& rk) {
    for (DataType dt : kAllTypes) {
      for (ReduceOp op : ops_for(dt)) {
        for (size_t count : {size_t{1}, size_t{5}, size_t{200}, size_t{2003}}) {
          const size_t bytes = count * dtype_size(dt);
          DevMem send(ops, bytes), recv(ops, bytes);
          send.write(input_at(dt, op, r, 0, count));
          const bool in_place = count == 200;
          Status st =
              rk->comm->allreduce(send.get(), in_place ? send.get() : recv.get(), count, dt, op);
          ASSERT_TRUE(st.ok()) << st.to_string();
          check_at(dt, op, n, (in_place ? send : recv).read(), 0, count,
                   what("allreduce", dt, op, count, r));
        }
      }
    }
  });
}

/// Fused buckets of device tensors: small (host-staged) and large (device ring).
inline void device_bucket_cases(DeviceOps* ops, int n) {
  coll_test::run_ranks(n, device_opts(), [&](int r, std::unique_ptr<Rank>& rk) {
    for (DataType dt : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
      for (const std::vector<size_t>& counts :
           {std::vector<size_t>{3, 0, 50}, std::vector<size_t>{600, 1, 901}}) {
        std::vector<std::unique_ptr<DevMem>> in, out;
        std::vector<TensorRef> bucket;
        size_t off = 0;
        for (size_t c : counts) {
          in.push_back(std::make_unique<DevMem>(ops, c * dtype_size(dt)));
          out.push_back(std::make_unique<DevMem>(ops, c * dtype_size(dt)));
          if (c) in.back()->write(input_at(dt, ReduceOp::kSum, r, off, c));
          bucket.push_back({in.back()->get(), out.back()->get(), c});
          off += c;
        }
        Status st = rk->comm->allreduce(bucket, dt, ReduceOp::kSum);
        ASSERT_TRUE(st.ok()) << st.to_string();
        off = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
          if (counts[i])
            check_at(dt, ReduceOp::kSum, n, out[i]->read(), off, counts[i],
                     what("bucket tensor", dt, ReduceOp::kSum, counts[i], r));
          off += counts[i];
        }
      }
    }
    ASSERT_TRUE(rk->comm->barrier().ok());
  });
}

/// Reduce-scatter, allgather and broadcast of device buffers, every dtype, sizes that are and
/// are not multiples of the chunk, with barriers between them.
inline void device_other_cases(DeviceOps* ops, int n) {
  const auto un = static_cast<size_t>(n);
  coll_test::run_ranks(n, device_opts(), [&](int r, std::unique_ptr<Rank>& rk) {
    for (DataType dt : kAllTypes) {
      const size_t es = dtype_size(dt);
      for (size_t c : {size_t{1}, size_t{37}, size_t{700}}) {
        for (ReduceOp op : ops_for(dt)) {
          DevMem send(ops, c * un * es), recv(ops, c * es);
          send.write(input_at(dt, op, r, 0, c * un));
          Status st = rk->comm->reduce_scatter(send.get(), recv.get(), c, dt, op);
          ASSERT_TRUE(st.ok()) << st.to_string();
          check_at(dt, op, n, recv.read(), c * static_cast<size_t>(r), c,
                   what("reduce_scatter", dt, op, c, r));
        }
        DevMem mine(ops, c * es), all(ops, c * un * es);
        mine.write(input_at(dt, ReduceOp::kSum, r, 0, c));
        Status st = rk->comm->allgather(mine.get(), all.get(), c, dt);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const auto got = all.read();
        for (int j = 0; j < n; ++j) {
          const auto want = input_at(dt, ReduceOp::kSum, j, 0, c);
          EXPECT_EQ(
              std::memcmp(got.data() + static_cast<size_t>(j) * c * es, want.data(), want.size()),
              0)
              << what("allgather", dt, ReduceOp::kSum, c, r) << " block " << j;
        }
        ASSERT_TRUE(rk->comm->barrier().ok());
      }
      for (size_t c : {size_t{1}, size_t{1001}}) {
        for (int root : {0, n - 1}) {
          DevMem buf(ops, c * es);
          const auto want = input_at(dt, ReduceOp::kSum, root, 0, c);
          buf.write(r == root ? want : pattern(c * es, 99));
          Status st = rk->comm->broadcast(buf.get(), c, dt, root);
          ASSERT_TRUE(st.ok()) << st.to_string();
          EXPECT_EQ(buf.read(), want) << what("broadcast", dt, ReduceOp::kSum, c, r);
        }
      }
    }
    // Point-to-point between device buffers (the receive from any rank).
    if (r < 2) {
      DevMem b(ops, 5000);
      int src = -1;
      if (r == 0) b.write(pattern(5000, 3));
      auto h = r == 0 ? rk->comm->send_async(b.get(), 5000, 1, 7)
                      : rk->comm->recv_async(b.get(), 5000, -1, 7, &src);
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      Status st = rk->comm->wait(*h, Millis(20000));
      ASSERT_TRUE(st.ok()) << st.to_string();
      if (r == 1) {
        EXPECT_EQ(b.read(), pattern(5000, 3));
        EXPECT_EQ(src, 0);
      }
    }
  });
}

enum class MixCall { kAllreduceRd, kAllreduceRing, kReduceScatter, kAllgather, kBroadcast };

/// Rank `odd` passes host buffers, the others device buffers: every rank fails at once
/// (InvalidArgument naming both kinds), long before the collective's timeout.
inline void device_mismatch_case(DeviceOps* ops, int n, int odd, MixCall call) {
  CommOptions o = device_opts();
  o.timeout = Millis(20000);
  std::atomic<int> checked{0};
  coll_test::run_ranks(n, o, [&](int r, std::unique_ptr<Rank>& rk) {
    const size_t count = call == MixCall::kAllreduceRd ? 5 : 700;
    const size_t bytes = count * static_cast<size_t>(n) * 4;
    std::vector<uint8_t> h1(bytes, 1), h2(bytes);
    DevMem d1(ops, bytes), d2(ops, bytes);
    void* a = r == odd ? static_cast<void*>(h1.data()) : d1.get();
    void* b = r == odd ? static_cast<void*>(h2.data()) : d2.get();
    const auto t0 = Clock::now();
    Status st;
    switch (call) {
      case MixCall::kAllreduceRd:
      case MixCall::kAllreduceRing:
        st = rk->comm->allreduce(a, b, count, DataType::kFloat32, ReduceOp::kSum);
        break;
      case MixCall::kReduceScatter:
        st = rk->comm->reduce_scatter(a, b, count, DataType::kFloat32, ReduceOp::kSum);
        break;
      case MixCall::kAllgather:
        st = rk->comm->allgather(a, b, count, DataType::kFloat32);
        break;
      case MixCall::kBroadcast:
        st = rk->comm->broadcast(a, count, DataType::kFloat32, 0);
        break;
    }
    const auto ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << "rank " << r << ": " << st.to_string();
    const std::string msg(st.message());
    EXPECT_NE(msg.find("device buffers"), std::string::npos) << "rank " << r << ": " << msg;
    EXPECT_NE(msg.find("host buffers"), std::string::npos) << "rank " << r << ": " << msg;
    EXPECT_LT(ms, 5000) << "rank " << r << " took " << ms << " ms to fail";
    // A failed call may leave transfers posted into the buffers: once every rank has its
    // error, close this rank (communicator, then Group) before the buffers are freed. Until
    // then keep the transport polled: dpdk finishes its handshakes and sends only so.
    ++checked;
    for (auto t1 = Clock::now(); checked.load() < n && Clock::now() - t1 < Millis(10000);) {
      // A polling transport (dpdk) must answer; the communicator's progress thread shares it.
      DriveScope d(rk->group->transport().gate());
      (void)rk->group->transport().cq().poll({});
      std::this_thread::sleep_for(Millis(1));
    }
    rk.reset();
  });
}

inline void device_mismatch_cases(DeviceOps* ops, int n) {
  for (MixCall c : {MixCall::kAllreduceRd, MixCall::kAllreduceRing, MixCall::kReduceScatter,
                    MixCall::kAllgather, MixCall::kBroadcast}) {
    SCOPED_TRACE("call " + std::to_string(static_cast<int>(c)));
    device_mismatch_case(ops, n, n == 2 ? 0 : 1, c);
  }
}

}  // namespace gw::cuda_test
