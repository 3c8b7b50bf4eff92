// The transport conformance suite (tests/conformance/test_sendrecv.cc and test_matching.cc,
// compiled into this binary) instantiated over DPDK ring-bus rows: ranks are threads of one
// process, each with its own DPDK port on the bus. Runs with --gtest_filter=Dpdk*: the
// conformance binary covers the other rows.
#include "conformance.h"

namespace gw::conformance {
namespace {

// Up to 5 polling ranks share 2 cores here, so a rank can go unscheduled for longer than the
// default dead-peer timeout under load; these rows check data, and dead-peer timing is tested
// in test_dpdk_ring and test_dpdk_procs with the default.
std::vector<TransportCase> dpdk_rows() {
  return {{"dpdk_ring", "dpdk", "dpdk:ring=conf,peer_timeout_ms=10000"},
          {"dpdk_ring_lossy", "dpdk",
           "dpdk:ring=lossy,peer_timeout_ms=10000,tx_drop=0.01,tx_dup=0.01,tx_reorder=0.01,"
           "rx_reorder=0.01"}};
}

using SendRecvRanks = RanksTest;
using SendRecv = TransportTest;
using Matching = TransportTest;
using AnySource = RanksTest;

INSTANTIATE_TEST_SUITE_P(Dpdk, SendRecv, ::testing::ValuesIn(dpdk_rows()), case_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, Matching, ::testing::ValuesIn(dpdk_rows()), case_name);
// Known issue (issue 4, open): with 5 ranks on one ring bus a transfer can stall until the
// dead-peer timeout, on either row, when run after the other tests of this binary (alone it
// passes). Kept to 2 and 3 ranks until the driver is fixed.
INSTANTIATE_TEST_SUITE_P(Dpdk, SendRecvRanks,
                         ::testing::Combine(::testing::ValuesIn(dpdk_rows()),
                                            ::testing::Values(2, 3)),
                         ranks_name);
INSTANTIATE_TEST_SUITE_P(Dpdk, AnySource,
                         ::testing::Combine(::testing::ValuesIn(dpdk_rows()),
                                            ::testing::Values(3)),
                         ranks_name);

}  // namespace
}  // namespace gw::conformance
