/// @file rdma_test_util.h
/// What the rdma suite's VM tests share: the rxe0 transport rows and the skip outside the VM.
#pragma once

#include <gtest/gtest.h>

#include "conformance.h"

namespace gw::conformance {

inline constexpr size_t kEager = 8192;  // rdma.eager_bytes default
inline const TransportCase kRxe{"rxe", "rdma", "rdma:dev=rxe0"};
inline const TransportCase kRxeQps2{"rxe_qps2", "rdma", "rdma:dev=rxe0,qps_per_conn=2"};

/// Skips (with the reason) where rxe0 does not exist, i.e. outside tests/rdma/run_in_vm.sh.
inline void require_rxe() {
  auto t = Transport::open(kRxe.spec);
  if (!t.ok() && t.status().code() == Code::kUnavailable)
    GTEST_SKIP() << "no rxe0 here (run through tests/rdma/run_in_vm.sh): "
                 << t.status().to_string();
  ASSERT_TRUE(t.ok()) << t.status().to_string();
}

}  // namespace gw::conformance
