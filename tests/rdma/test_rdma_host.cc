// Suite 'rdma', on the host (no RDMA device needed): GPUDirect path choice from probed facts,
// and that opening without a device says so (Unavailable), so "auto" falls back.
#include <gtest/gtest.h>

#include "gw_transport.h"
#include "rdma_gpu.h"

namespace gw::drv::rdma {
namespace {

TEST(RdmaGpuPath, NoCudaMeansNoneOrStrictError) {
  GpuFacts none;
  auto p = choose_gpu_path("auto", false, none);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "none");
  EXPECT_FALSE(p->zero_copy);
  auto s = choose_gpu_path("auto", true, none);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kNotSupported);
  EXPECT_NE(s.status().to_string().find("gpu_strict"), std::string::npos);
}

TEST(RdmaGpuPath, PrefersDmabufThenPeermemThenStaging) {
  GpuFacts f{true, true, 1, true, nullptr, true};
  EXPECT_EQ(choose_gpu_path("auto", false, f)->name, "dmabuf");
  f.dmabuf_symbol = false;
  EXPECT_EQ(choose_gpu_path("auto", false, f)->name, "peermem");
  EXPECT_TRUE(choose_gpu_path("auto", false, f)->zero_copy);
  f.peermem = false;
  auto st = choose_gpu_path("auto", false, f);
  EXPECT_EQ(st->name, "staging");
  EXPECT_FALSE(st->zero_copy);
  EXPECT_FALSE(choose_gpu_path("auto", true, f).ok());
  f.device_ops = false;  // CUDA is there, but nothing in gradwire can copy its memory
  EXPECT_EQ(choose_gpu_path("auto", false, f)->name, "none");
}

TEST(RdmaGpuPath, ForcedPathMustExist) {
  GpuFacts f{true, false, 1, false, nullptr, true};
  auto d = choose_gpu_path("dmabuf", false, f);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kNotSupported);
  EXPECT_NE(d.status().to_string().find("dma-buf export absent"), std::string::npos);
  EXPECT_EQ(choose_gpu_path("staging", false, f)->name, "staging");
  EXPECT_EQ(choose_gpu_path("bogus", false, f).status().code(), Code::kInvalidArgument);
  f.device_ops = false;
  auto s = choose_gpu_path("staging", false, f);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kNotSupported);
  EXPECT_NE(s.status().to_string().find("device copies absent"), std::string::npos)
      << s.status().to_string();
}

TEST(RdmaGpuPath, ProbeOfThisHostIsConsistent) {
  GpuFacts f = probe_gpu_facts();
  if (!f.libcuda) {
    EXPECT_EQ(f.cuda_devices, 0);
  }
  EXPECT_TRUE(choose_gpu_path("auto", false, f).ok());
}

// Which registration each path uses; staging/none refuse.
TEST(RdmaGpuRegistration, PathDecidesTheCall) {
  GpuFacts f{true, true, 1, true, nullptr, true};
  EXPECT_EQ(gpu_registration(*choose_gpu_path("auto", false, f)), GpuReg::kDmabuf);
  EXPECT_EQ(gpu_registration(*choose_gpu_path("peermem", false, f)), GpuReg::kPeermem);
  EXPECT_EQ(gpu_registration(*choose_gpu_path("staging", false, f)), GpuReg::kRefuse);
  EXPECT_EQ(gpu_registration(*choose_gpu_path("auto", false, GpuFacts{})), GpuReg::kRefuse);
  // A path object that claims dmabuf but is not zero-copy is refused, not trusted.
  EXPECT_EQ(gpu_registration(GpuPath{"dmabuf", false, "", nullptr}), GpuReg::kRefuse);
}

// The dma-buf export covers whole pages; the MR starts at the caller's address inside it.
TEST(RdmaGpuRegistration, DmabufRangeIsPageAligned) {
  DmabufRange r = dmabuf_range(0x7f0000001234, 100, 4096);
  EXPECT_EQ(r.base, 0x7f0000001000u);
  EXPECT_EQ(r.offset, 0x234u);
  EXPECT_EQ(r.size, 4096u);
  r = dmabuf_range(0x7f0000000ff0, 0x20, 4096);  // straddles a page boundary
  EXPECT_EQ(r.base, 0x7f0000000000u);
  EXPECT_EQ(r.size, 8192u);
  EXPECT_EQ(r.offset, 0xff0u);
  r = dmabuf_range(0x200000, 0x10000, 65536);
  EXPECT_EQ(r.base, 0x200000u);
  EXPECT_EQ(r.size, 0x10000u);
  EXPECT_EQ(r.offset, 0u);
}

// Without a GPUDirect path, registering CUDA memory is NotSupported and says what to do;
// no verbs call is made (the protection domain is never touched: null here).
TEST(RdmaGpuRegistration, NoPathRefusesNamingStaging) {
  auto path = choose_gpu_path("auto", false, GpuFacts{true, false, 1, false, nullptr, true});
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->name, "staging");
  int x = 0;
  auto mr = register_cuda(nullptr, *path, &x, sizeof x, 0, "rxe0");
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(mr.status().code(), Code::kNotSupported);
  const std::string msg = mr.status().to_string();
  EXPECT_NE(msg.find("rdma.gpu=staging"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nvidia_peermem"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rxe0"), std::string::npos) << msg;
  auto bad = register_cuda(nullptr, *path, nullptr, 64, 0, "rxe0");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

// The dma-buf path calls the CUDA export with the page-aligned range and reports its failure
// with the CUresult (a fake export stands in for libcuda).
int g_export_calls = 0;
uint64_t g_export_base = 0, g_export_size = 0;
int fake_export(void* handle, uint64_t dptr, size_t size, int type, unsigned long long) {
  ++g_export_calls;
  g_export_base = dptr;
  g_export_size = size;
  EXPECT_EQ(type, kCuMemRangeHandleTypeDmaBufFd);
  *static_cast<int*>(handle) = -1;
  return 1;  // CUDA_ERROR_INVALID_VALUE
}

TEST(RdmaGpuRegistration, DmabufExportFailureIsReported) {
  GpuFacts f{true, true, 1, false, &fake_export};
  auto path = choose_gpu_path("auto", false, f);
  ASSERT_TRUE(path.ok());
  ASSERT_EQ(gpu_registration(*path), GpuReg::kDmabuf);
  ASSERT_EQ(path->dmabuf_export, &fake_export);
  auto mr = register_cuda(nullptr, *path, reinterpret_cast<void*>(uintptr_t{0x7f0000001234}), 100,
                          0, "mlx5_0");
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(mr.status().code(), Code::kSystemError);
  EXPECT_NE(mr.status().to_string().find("CUresult 1"), std::string::npos);
  EXPECT_EQ(g_export_calls, 1);
  EXPECT_EQ(g_export_base, 0x7f0000001000u);
  EXPECT_GE(g_export_size, 4096u);
}

TEST(RdmaOpen, WithoutDeviceIsUnavailableOrOpens) {
  auto t = Transport::open("rdma");
  if (t.ok()) {
    EXPECT_EQ((*t)->properties().name, "rdma");
    EXPECT_TRUE((*t)->properties().one_sided);
    return;
  }
  EXPECT_EQ(t.status().code(), Code::kUnavailable) << t.status().to_string();
}

}  // namespace
}  // namespace gw::drv::rdma
