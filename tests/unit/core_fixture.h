// A transport core for unit tests to drive as a driver would (test_core*.cc): budget 100 bytes,
// 16 completions, 8 any-source receives; drain() returns what the sink holds.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "gw_core.h"
#include "log.h"

namespace gw::core {

struct CoreFixture : ::testing::Test {
  void SetUp() override { t.init("test", log::get("gw.test"), 16, 8, 100); }
  std::vector<Completion> drain() {
    std::vector<Completion> out(64);
    out.resize(t.sink().drain(out));
    return out;
  }
  TransportCore t;
};

}  // namespace gw::core
