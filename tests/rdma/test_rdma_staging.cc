// Suite 'rdma', in the soft-RoCE VM: CUDA memory without GPUDirect (rdma.gpu = staging). The
// emulated device (tests/cuda/emulated_device_ops.h) hands out PROT_NONE memory, so any
// registration or CPU access of it by the driver fails loudly, and finishes its copies only
// after a few queries, so "copy not done yet" is exercised. Small buffers (8 KiB x 3 per
// direction) force many windows and buffer starvation; both ranks send at once.
#include <cstring>

#include "conformance.h"
#include "emulated_device_ops.h"
#include "rdma_test_util.h"

namespace gw::conformance {
namespace {

using cuda_test::EmulatedDeviceOps;
using cuda_test::ScopedDeviceOps;

const TransportCase kStaged{"rxe_staged", "rdma",
                            "rdma:dev=rxe0,gpu=staging,staging_chunk_bytes=8192,staging_slots=3"};
const TransportCase kStagedQps2{
    "rxe_staged_qps2", "rdma",
    "rdma:dev=rxe0,gpu=staging,staging_chunk_bytes=8192,staging_slots=3,qps_per_conn=2,"
    "min_stripe_bytes=16384"};

// A buffer in host or (emulated) device memory, with guard bytes after `len`.
struct Buf {
  EmulatedDeviceOps* ops = nullptr;
  bool dev = false;
  size_t len = 0;
  std::vector<uint8_t> host;
  void* d = nullptr;
  MemoryRegion mr;
  Buf(EmulatedDeviceOps* o, bool device, size_t n) : ops(o), dev(device), len(n) {
    if (!dev) {
      host.assign(n + kGuard, kGuardByte);
      return;
    }
    d = *ops->alloc_device(n + kGuard);
    std::memset(ops->shadow(d), kGuardByte, n + kGuard);
  }
  ~Buf() {
    mr = MemoryRegion();
    if (d) ops->free_device(d);
  }
  void* ptr() { return dev ? d : host.data(); }
  uint8_t* bytes() { return dev ? ops->shadow(d) : host.data(); }
};

struct Case {
  bool src_dev, dst_dev, reg;
  size_t len;
};

// Every size across the eager limit, the buffer size and striping, device->device,
// device->host and host->device, registered and plain device pointers; both directions at once.
void exchange(const TransportCase& tc, bool late_recvs) {
  EmulatedDeviceOps ops(3);
  ScopedDeviceOps scope(&ops);
  auto groups = make_groups(tc, 2);
  ASSERT_EQ(groups.size(), 2u);
  std::vector<Case> cases;
  for (size_t len : {size_t{1}, kEager - 1, kEager, kEager + 1, size_t{8192 * 3 + 1}, size_t{65537},
                     (size_t{1} << 20) + 7}) {
    cases.push_back({true, true, true, len});
    cases.push_back({true, false, true, len});
    cases.push_back({false, true, true, len});
    cases.push_back({true, true, false, len});
  }
  std::vector<std::unique_ptr<Buf>> src, dst;
  auto post_recvs = [&] {
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < cases.size(); ++i) {
        Buf& b = *dst[i * 2 + static_cast<size_t>(r)];
        RecvRequest q{b.ptr(), b.len, i, 1000 + i, cases[i].reg && b.dev ? &b.mr : nullptr};
        ASSERT_EQ(taken(groups[static_cast<size_t>(r)]->endpoint(1 - r).post_recv({&q, 1})), 1u);
      }
    }
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 0; r < 2; ++r) {
      auto& g = *groups[static_cast<size_t>(r)];
      src.push_back(std::make_unique<Buf>(&ops, cases[i].src_dev, cases[i].len));
      dst.push_back(std::make_unique<Buf>(&ops, cases[i].dst_dev, cases[i].len));
      fill_pattern(src.back()->bytes(), cases[i].len, msg_seed(r, 1 - r, i, 0));
      for (Buf* b : {src.back().get(), dst.back().get()}) {
        if (!b->dev || !cases[i].reg) continue;
        auto mr = g.transport().register_memory(b->ptr(), b->len, MemKind::kCudaDevice);
        ASSERT_TRUE(mr.ok()) << mr.status().to_string();
        b->mr = std::move(*mr);
      }
    }
  }
  if (!late_recvs) post_recvs();
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 0; r < 2; ++r) {
      Buf& b = *src[i * 2 + static_cast<size_t>(r)];
      SendRequest s{b.ptr(), b.len, i, i, cases[i].reg && b.dev ? &b.mr : nullptr};
      ASSERT_EQ(taken(groups[static_cast<size_t>(r)]->endpoint(1 - r).post_send({&s, 1})), 1u);
    }
  }
  size_t want = 4 * cases.size(), got = 0;
  auto pump = [&](size_t until) {
    const auto end = Clock::now() + std::chrono::seconds(60);
    while (got < until && Clock::now() < end) {
      Completion c[16];
      for (auto& g : groups) {
        auto n = g->transport().cq().poll(c);
        ASSERT_TRUE(n.ok()) << n.status().to_string();
        for (size_t k = 0; k < *n; ++k) {
          ASSERT_EQ(c[k].code, Code::kOk)
              << (c[k].op == Op::kSend ? "send " : "recv ") << c[k].wr_id << ": "
              << (c[k].ep ? c[k].ep->status().to_string() : "");
          ++got;
        }
      }
    }
  };
  if (late_recvs) {
    pump(2 * cases.size());  // sends complete first (eager or pulled unexpectedly)
    ASSERT_EQ(got, 2 * cases.size());
    post_recvs();
  }
  pump(want);
  ASSERT_EQ(got, want);
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 0; r < 2; ++r) {
      Buf& b = *dst[i * 2 + static_cast<size_t>(r)];
      EXPECT_EQ(check_pattern(b.bytes(), b.len, msg_seed(1 - r, r, i, 0)), "")
          << "case " << i << " (" << cases[i].len << " bytes, src "
          << (cases[i].src_dev ? "device" : "host") << ", dst "
          << (cases[i].dst_dev ? "device" : "host") << ") into rank " << r;
      EXPECT_EQ(b.bytes()[b.len], kGuardByte) << "case " << i << ": wrote past the buffer";
    }
  }
  for (auto& g : groups) {
    auto st = g->transport().stats();
    EXPECT_GT(st["staged_sends"], 0u);
    if (!late_recvs) {
      EXPECT_GT(st["staged_recvs"], 0u);
      EXPECT_GT(st["staging_windows"], 10u);
    }
  }
}

class RdmaStaging : public ::testing::Test {
 protected:
  void SetUp() override { require_rxe(); }
};

TEST_F(RdmaStaging, DeviceAndHostEverySizeBothWays) { exchange(kStaged, false); }

TEST_F(RdmaStaging, StripedOverTwoQueuePairs) { exchange(kStagedQps2, false); }

// Receives posted after the sends completed: rendezvous messages were pulled into host bounce
// buffers and are copied to the device when matched.
TEST_F(RdmaStaging, ReceivesPostedLate) { exchange(kStaged, true); }

// gpu_strict turns the staging fallback into an error at open, naming the setting.
TEST_F(RdmaStaging, StrictRefusesStaging) {
  EmulatedDeviceOps ops;
  ScopedDeviceOps scope(&ops);
  auto t = Transport::open("rdma:dev=rxe0,gpu_strict=true");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kNotSupported);
  EXPECT_NE(t.status().to_string().find("gpu_strict"), std::string::npos) << t.status().to_string();
}

// Without a device-copy table, registering CUDA memory is refused with what to do.
TEST_F(RdmaStaging, NoDeviceTableRefusesCudaMemory) {
  auto t = Transport::open("rdma:dev=rxe0");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  std::vector<uint8_t> host(4096);
  auto mr = (*t)->register_memory(host.data(), host.size(), MemKind::kCudaDevice);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(mr.status().code(), Code::kNotSupported);
  EXPECT_NE(mr.status().to_string().find("rdma.gpu=staging"), std::string::npos)
      << mr.status().to_string();
}

}  // namespace
}  // namespace gw::conformance
