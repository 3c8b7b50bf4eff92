// Suite 'cuda' on a GPU: the CUDA reduction kernels against the CPU kernels element by element
// (identical bytes), TCP send/recv of real device buffers (staged, bit-exact), allreduce of
// device buffers over TCP on 2-4 ranks against a float64 reference, identical on every rank,
// and the emulated-device cases of every collective and the PS (device_*_cases.h).
// Without a usable GPU every test skips with CUDA's own reason (the binary still exits 0).
#include <gtest/gtest.h>

#include <mutex>

#include "coll_device.h"
#include "coll_harness.h"
#include "cuda_compare.h"
#include "device_coll_cases.h"
#include "device_ps_cases.h"
#include "gw_device.h"
#include "staging_cases.h"

namespace gw::cuda_test {
namespace {

// Skips the test (with the reason) unless a GPU and the CUDA kernels are there.
#define GW_REQUIRE_GPU()                                                             \
  do {                                                                               \
    auto gw_ops_ = device_ops();                                                     \
    if (!gw_ops_.ok()) GTEST_SKIP() << gw_ops_.status().to_string();                 \
    if (!gw_ops_.value()->can_reduce()) GTEST_SKIP() << "no CUDA reduction kernels"; \
  } while (0)

DeviceOps* ops() { return device_ops().value(); }

class Kernels : public ::testing::TestWithParam<DataType> {};

TEST_P(Kernels, SameBytesAsTheCpuKernels) {
  GW_REQUIRE_GPU();
  const DataType dt = GetParam();
  const size_t es = dtype_size(dt);
  const bool exact_nan = cpu_is_x86_f16c();
  std::cout << "GPU: " << ops()->describe() << "; CPU kernels: " << coll::reduce_target_name()
            << "\n";
  auto stream = StreamHandle::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // Sizes around the 16-byte vector and the grid; offset 1 makes the operands misaligned.
  for (size_t n : {size_t{1}, size_t{7}, size_t{4099}, size_t{1} << 20}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      const auto a = random_elems(dt, n, 21), b = random_elems(dt, n, 22);
      DevMem da(ops(), (n + off) * es), db(ops(), (n + off) * es), dd(ops(), (n + off) * es);
      std::vector<uint8_t> pa((n + off) * es), pb((n + off) * es);
      std::copy(a.begin(), a.end(), pa.begin() + static_cast<long>(off * es));
      std::copy(b.begin(), b.end(), pb.begin() + static_cast<long>(off * es));
      da.write(pa);
      db.write(pb);
      for (int op = 0; op < kNumReduceOps; ++op) {
        for (uint32_t div : {0u, 3u}) {
          const auto rop = static_cast<ReduceOp>(op);
          if (div && rop != ReduceOp::kAvg) continue;
          std::vector<uint8_t> want(n * es);
          coll::reduce(dt, rop, want.data(), a.data(), b.data(), n, div);
          Status st = ops()->reduce(dt, rop, dd.get() + off * es, da.get() + off * es,
                                    db.get() + off * es, n, div, stream->get());
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_TRUE(ops()->synchronize(stream->get()).ok());
          auto all = dd.read();
          std::vector<uint8_t> got(all.begin() + static_cast<long>(off * es), all.end());
          EXPECT_EQ(compare(dt, got, want, a, b, exact_nan), "")
              << dtype_name(dt) << " " << op_name(rop) << " divisor " << div << " n " << n
              << " offset " << off;
        }
      }
      // In place (dst == a), as the allreduce uses it.
      std::vector<uint8_t> want(n * es);
      coll::reduce(dt, ReduceOp::kSum, want.data(), a.data(), b.data(), n, 0);
      ASSERT_TRUE(ops()
                      ->reduce(dt, ReduceOp::kSum, da.get() + off * es, da.get() + off * es,
                               db.get() + off * es, n, 0, stream->get())
                      .ok());
      ASSERT_TRUE(ops()->synchronize(stream->get()).ok());
      auto all = da.read();
      std::vector<uint8_t> got(all.begin() + static_cast<long>(off * es), all.end());
      EXPECT_EQ(compare(dt, got, want, a, b, exact_nan), "") << "in place, n " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Kernels,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64,
                                           DataType::kFloat16, DataType::kBFloat16,
                                           DataType::kInt32, DataType::kInt64, DataType::kUInt8),
                         [](const auto& i) { return std::string(dtype_name(i.param)); });

TEST(Memory, KindsCopiesAndDmaBuf) {
  GW_REQUIRE_GPU();
  auto d = DeviceBuffer::create(1 << 20);
  auto h = PinnedBuffer::create(1 << 20);
  ASSERT_TRUE(d.ok() && h.ok()) << d.status().to_string() << h.status().to_string();
  int stack = 0;
  EXPECT_EQ(memory_kind_of(d->get()), MemKind::kCudaDevice);
  EXPECT_EQ(memory_kind_of(h->get()), MemKind::kCudaHost);
  EXPECT_EQ(memory_kind_of(&stack), MemKind::kHost);
  const auto data = pattern(1 << 20, 5);
  std::copy(data.begin(), data.end(), h->get());
  auto s = StreamHandle::create();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(ops()->copy_async(d->get(), h->get(), 1 << 20, s->get()).ok());
  std::vector<uint8_t> back(1 << 20);
  ASSERT_TRUE(ops()->copy_async(back.data(), d->get(), 1 << 20, s->get()).ok());
  ASSERT_TRUE(ops()->synchronize(s->get()).ok());
  EXPECT_EQ(back, data);
  // dma-buf export: an fd where the system has it, otherwise NotSupported with the reason.
  auto buf = ops()->export_dmabuf(static_cast<uint8_t*>(d->get()) + 4096, 8192);
  if (buf.ok()) {
    EXPECT_GE(buf->fd(), 0);
    EXPECT_EQ(buf->length(), 8192u);
  } else {
    EXPECT_EQ(buf.status().code(), Code::kNotSupported) << buf.status().to_string();
    std::cout << "dma-buf: " << buf.status().to_string() << "\n";
  }
  // Errors are Status values, not crashes.
  auto huge = ops()->alloc_device(size_t{1} << 60);
  EXPECT_EQ(huge.status().code(), Code::kResourceExhausted) << huge.status().to_string();
}

TEST(TcpDeviceBuffers, StagedSendRecvBitExact) {
  GW_REQUIRE_GPU();
  for (int streams : {1, 4}) {
    auto p =
        Pair::make("tcp:iface=lo,staging_chunk_bytes=65536,streams=" + std::to_string(streams));
    ASSERT_NE(p, nullptr);
    uint32_t seed = 1;
    for (size_t len : {size_t{1}, size_t{65535}, size_t{65536}, size_t{300001}, size_t{16} << 20}) {
      for (auto [from, to] :
           {std::pair{Where::kDevice, Where::kDevice}, std::pair{Where::kHost, Where::kDevice},
            std::pair{Where::kDevice, Where::kHost}}) {
        SCOPED_TRACE("len " + std::to_string(len) + " streams " + std::to_string(streams));
        one_message(ops(), *p, len, from, to, true, seed++);
      }
    }
    one_message(ops(), *p, 100000, Where::kDevice, Where::kDevice, false, 99);
    many_messages(ops(), *p, 32, 200000);
  }
}

struct AllreduceCase {
  int ranks;
  DataType dt;
  ReduceOp op;
  size_t count;
};

class DeviceAllreduce : public ::testing::TestWithParam<AllreduceCase> {};

TEST_P(DeviceAllreduce, MatchesFloat64ReferenceOnEveryRank) {
  GW_REQUIRE_GPU();
  const auto [n, dt, op, count] = GetParam();
  const size_t es = dtype_size(dt);
  std::mutex mu;
  std::vector<std::vector<uint8_t>> results(static_cast<size_t>(n));
  coll_test::run_ranks(n, coll_test::small_chunks(), [&](int r, auto& rk) {
    const auto in = coll_test::make_input(dt, op, r, count);
    DevMem send(ops(), count * es), recv(ops(), count * es);
    send.write(in);
    // Out of place, then in place on the result's buffer.
    Status st = rk->comm->allreduce(send.get(), recv.get(), count, dt, op);
    ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.to_string();
    auto out = recv.read();
    EXPECT_EQ(coll_test::check_result(dt, op, n, out.data(), count, "rank " + std::to_string(r)),
              0u);
    send.write(in);
    st = rk->comm->allreduce(send.get(), send.get(), count, dt, op);
    ASSERT_TRUE(st.ok()) << "rank " << r << " (in place): " << st.to_string();
    EXPECT_EQ(send.read(), out) << "in place differs from out of place on rank " << r;
    std::lock_guard lk(mu);
    results[static_cast<size_t>(r)] = std::move(out);
  });
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(results[static_cast<size_t>(r)], results[0]) << "rank " << r << " differs from 0";
}

// The cases CI runs on the emulated device (test_device_coll.cc), on the GPU: every
// collective and send/recv of device buffers on 2 and 3 ranks, every path (host-staged,
// recursive doubling, the device ring), element by element on every rank; a rank with host
// buffers among device ones failing every rank at once; PS push/pull of device buffers.
class DeviceColl : public ::testing::TestWithParam<int> {};

TEST_P(DeviceColl, Allreduce) {
  GW_REQUIRE_GPU();
  device_allreduce_cases(ops(), GetParam());
}
TEST_P(DeviceColl, FusedBucket) {
  GW_REQUIRE_GPU();
  device_bucket_cases(ops(), GetParam());
}
TEST_P(DeviceColl, ReduceScatterAllgatherBroadcastP2p) {
  GW_REQUIRE_GPU();
  device_other_cases(ops(), GetParam());
}
TEST_P(DeviceColl, HostAmongDeviceFailsEveryRank) {
  GW_REQUIRE_GPU();
  device_mismatch_cases(ops(), GetParam());
}
INSTANTIATE_TEST_SUITE_P(Ranks, DeviceColl, ::testing::Values(2, 3),
                         [](const auto& i) { return std::to_string(i.param) + "ranks"; });

TEST(DevicePs, PushPullBsp) {
  GW_REQUIRE_GPU();
  device_ps_case(ops());
}

std::vector<AllreduceCase> allreduce_cases() {
  std::vector<AllreduceCase> v;
  for (int n : {2, 3, 4})
    for (DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                        DataType::kFloat64, DataType::kInt32, DataType::kInt64})
      for (ReduceOp op :
           {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg})
        v.push_back({n, dt, op, 5000 + static_cast<size_t>(n)});
  v.push_back({4, DataType::kFloat32, ReduceOp::kSum, size_t{4} << 20});  // 16 MiB
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceAllreduce, ::testing::ValuesIn(allreduce_cases()),
                         [](const auto& i) {
                           return std::to_string(i.param.ranks) + "ranks_" +
                                  dtype_name(i.param.dt) + "_" + op_name(i.param.op) + "_" +
                                  std::to_string(i.param.count);
                         });

}  // namespace
}  // namespace gw::cuda_test
