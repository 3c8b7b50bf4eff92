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
  GpuFacts f{true, true, 1, true};
  EXPECT_EQ(choose_gpu_path("auto", false, f)->name, "dmabuf");
  f.dmabuf_symbol = false;
  EXPECT_EQ(choose_gpu_path("auto", false, f)->name, "peermem");
  EXPECT_TRUE(choose_gpu_path("auto", false, f)->zero_copy);
  f.peermem = false;
  auto st = choose_gpu_path("auto", false, f);
  EXPECT_EQ(st->name, "staging");
  EXPECT_FALSE(st->zero_copy);
  EXPECT_FALSE(choose_gpu_path("auto", true, f).ok());
}

TEST(RdmaGpuPath, ForcedPathMustExist) {
  GpuFacts f{true, false, 1, false};
  auto d = choose_gpu_path("dmabuf", false, f);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kNotSupported);
  EXPECT_NE(d.status().to_string().find("dma-buf export absent"), std::string::npos);
  EXPECT_EQ(choose_gpu_path("staging", false, f)->name, "staging");
  EXPECT_EQ(choose_gpu_path("bogus", false, f).status().code(), Code::kInvalidArgument);
}

TEST(RdmaGpuPath, ProbeOfThisHostIsConsistent) {
  GpuFacts f = probe_gpu_facts();
  if (!f.libcuda) {
    EXPECT_EQ(f.cuda_devices, 0);
  }
  EXPECT_TRUE(choose_gpu_path("auto", false, f).ok());
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
