// The transport conformance suite (tests/conformance/test_sendrecv.cc, test_matching.cc,
// test_policy.cc and test_abort.cc, compiled into this binary) instantiated over DPDK rows:
// the ring bus (ranks are threads of one process, each with its own port on the bus), memif,
// and af_packet and af_xdp on veths (ranks are processes). Runs with --gtest_filter=Dpdk*: the
// conformance binary covers the other rows.
#include <glob.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "conformance.h"
#include "dpdk_test_util.h"
#include "dpdk_xdp_prog.h"  // generated: where the build put gradwire's XDP program

namespace gw::conformance {
namespace {

// Multi-rank rows: up to 5 polling ranks share 2 cores, with the default dead-peer timeout; a
// rank that stalls for longer than that is a bug (the ring bus once did, through lock-waiter
// preemption in its mbuf pool; see dpdk_eal.cc).
std::vector<TransportCase> dpdk_rows() {
  return {{"dpdk_ring", "dpdk", "dpdk:ring=conf"},
          {"dpdk_ring_lossy", "dpdk",
           "dpdk:ring=lossy,tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01,rx_reorder=0.01"}};
}

// Two-rank rows: SixtyFourMiBBothWays fills and checks 128 MiB per rank without polling (the
// harness, not the driver); on a loaded 2-core machine that takes longer than the default
// 1.5 s, and a polling transport's peer cannot tell it from a hung rank. Dead-peer timing is
// tested with the default in test_dpdk_ring and test_dpdk_procs.
std::vector<TransportCase> dpdk_rows_2() {
  return {{"dpdk_ring", "dpdk", "dpdk:ring=conf,peer_timeout_ms=10000"},
          {"dpdk_ring_lossy", "dpdk",
           "dpdk:ring=lossy,peer_timeout_ms=10000,tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01,"
           "rx_reorder=0.01"}};
}

// net_memif between two processes (rank 0 the server), one socket per group. memif is point
// to point: the two-rank suites.
std::vector<TransportCase> memif_rows() {
  return {{"dpdk_memif", "dpdk",
           "dpdk:vdev=net_memif0,role={role},socket=/tmp/gw-conf-{run}/memif.sock,"
           "peer_timeout_ms=10000"},
          {"dpdk_memif_lossy", "dpdk",
           "dpdk:vdev=net_memif0,role={role},socket=/tmp/gw-conf-{run}/memif.sock,"
           "peer_timeout_ms=10000,tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01,rx_reorder=0.01"}};
}

// net_af_packet on a veth pair between two network namespaces that this binary makes: rank r
// runs in namespace r on interface r. The names carry the id of the binary's own process,
// which its rank processes inherit (GW_CONF_VETH_ID).
std::string veth_id() {
  const char* id = std::getenv("GW_CONF_VETH_ID");
  return id ? id : std::to_string(::getpid() % 100000);
}

std::vector<TransportCase> af_packet_rows() {
  static const std::string spec =
      "dpdk:vdev=net_af_packet0,iface=gwcf{rank}" + veth_id() + ",peer_timeout_ms=10000";
  static const std::string lossy = spec + ",tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01";
  return {{"dpdk_af_packet", "dpdk", spec.c_str()},
          {"dpdk_af_packet_lossy", "dpdk", lossy.c_str()}};
}

// Why net_af_xdp cannot run here ("" when it can): the rows are left out and this is printed.
std::string af_xdp_unavailable() {
  if (!*GW_XDP_PROG_BUILD || ::access(GW_XDP_PROG_BUILD, R_OK) != 0)
    return "gradwire's XDP program was not built (needs clang and libbpf-dev)";
  glob_t g{};
  const bool pmd = ::glob("/usr/lib/*/dpdk/pmds-*/librte_net_af_xdp.so*", 0, nullptr, &g) == 0;
  ::globfree(&g);
  if (!pmd) return "DPDK's net_af_xdp PMD is not installed (librte-net-af-xdp23)";
  const int fd = ::socket(44 /* AF_XDP */, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return std::string("the kernel refuses AF_XDP sockets (CONFIG_XDP_SOCKETS): ") +
           std::strerror(errno);
  }
  ::close(fd);
  return "";
}

// net_af_xdp (copy mode on veth) on the same veths, with gradwire's XDP program: the store's
// TCP reaches the kernel beside it.
std::vector<TransportCase> af_xdp_rows() {
  static const std::string why = af_xdp_unavailable();
  if (!why.empty()) {
    if (child_rank() < 0) std::fprintf(stderr, "af_xdp rows left out: %s\n", why.c_str());
    return {};
  }
  static const std::string spec =
      "dpdk:vdev=net_af_xdp0,iface=gwcf{rank}" + veth_id() + ",peer_timeout_ms=10000";
  static const std::string lossy = spec + ",tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01";
  return {{"dpdk_af_xdp", "dpdk", spec.c_str()}, {"dpdk_af_xdp_lossy", "dpdk", lossy.c_str()}};
}

// Made once by the test binary's own process, never by a rank's.
class VethEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    if (child_rank() >= 0) return;
    ::setenv("GW_CONF_VETH_ID", veth_id().c_str(), 1);
    veth_ = std::make_unique<dpdktest::Veth>("cf", veth_id());
    if (!veth_->why().empty()) {
      std::fprintf(stderr, "af_packet rows cannot run: %s\n", veth_->why().c_str());
      return;
    }
    set_rank_netns({veth_->ns[0], veth_->ns[1]});
  }
  void TearDown() override { veth_.reset(); }

 private:
  std::unique_ptr<dpdktest::Veth> veth_;
};
[[maybe_unused]] ::testing::Environment* const g_veth =
    ::testing::AddGlobalTestEnvironment(new VethEnv);

using SendRecvRanks = RanksTest;
using SendRecv = TransportTest;
using Matching = TransportTest;
using AnySource = RanksTest;
using Policy = TransportTest;
using Abort = TransportTest;

INSTANTIATE_TEST_SUITE_P(Dpdk, SendRecv, ::testing::ValuesIn(dpdk_rows_2()), case_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, Matching, ::testing::ValuesIn(dpdk_rows_2()), case_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, Policy, ::testing::ValuesIn(dpdk_rows_2()), case_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, Abort, ::testing::ValuesIn(dpdk_rows_2()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkMemif, SendRecv, ::testing::ValuesIn(memif_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkMemif, Matching, ::testing::ValuesIn(memif_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkMemif, Abort, ::testing::ValuesIn(memif_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkAfPacket, Abort, ::testing::ValuesIn(af_packet_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkAfPacket, SendRecv, ::testing::ValuesIn(af_packet_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkAfPacket, Matching, ::testing::ValuesIn(af_packet_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkAfXdp, Abort, ::testing::ValuesIn(af_xdp_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkAfXdp, SendRecv, ::testing::ValuesIn(af_xdp_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(DpdkAfXdp, Matching, ::testing::ValuesIn(af_xdp_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, SendRecvRanks,
                         ::testing::Combine(::testing::ValuesIn(dpdk_rows()),
                                            ::testing::Values(2, 3, 4, 5)),
                         ranks_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, AnySource,
                         ::testing::Combine(::testing::ValuesIn(dpdk_rows()),
                                            ::testing::Values(3, 5)),
                         ranks_name);

}  // namespace
}  // namespace gw::conformance
