// The transport conformance suite (tests/conformance/test_sendrecv.cc and test_matching.cc,
// compiled into this binary) instantiated over DPDK ring-bus rows: ranks are threads of one
// process, each with its own DPDK port on the bus. Runs with --gtest_filter=Dpdk*: the
// conformance binary covers the other rows.
#include "conformance.h"

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

using SendRecvRanks = RanksTest;
using SendRecv = TransportTest;
using Matching = TransportTest;
using AnySource = RanksTest;

INSTANTIATE_TEST_SUITE_P(Dpdk, SendRecv, ::testing::ValuesIn(dpdk_rows_2()), case_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, Matching, ::testing::ValuesIn(dpdk_rows_2()), case_name);
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
