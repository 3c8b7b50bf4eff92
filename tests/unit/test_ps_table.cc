// Regression for a defect the PS fuzz target's work turned up (tests/fuzz/fuzz_ps_msgs.cc):
// a worker's key table whose key count makes `16 * nkeys` wrap passed the length check, and the
// server walked its keys past the message (reading what follows in its receive buffer). It must
// be refused for its length, naming the count.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "gw_ps.h"
#include "ps_group.h"
#include "ps_impl.h"

namespace gw {
namespace {

TEST(PsTable, KeyCountThatWrapsTheLengthCheckIsRefused) {
  const std::vector<KeySpec> keys{{1, 8}, {2, 100}};
  PsOptions o;
  o.timeout = Millis(10000);
  auto store = make_in_process_store();
  std::unique_ptr<Group> g1;
  std::thread worker([&] {
    g1 = join(store, 1);
    if (!g1) return;
    // Two real keys, announced as 2^60 + 2: 16 * nkeys wraps to 32, so 32 + 32 = the length.
    const std::vector<uint8_t> table = key_table(o, keys, (uint64_t{1} << 60) + keys.size());
    SendRequest s{table.data(), table.size(), ps::tag(ps::TagKind::kTable), 1, nullptr};
    ASSERT_EQ(g1->endpoint(0).post_send({&s, 1}).value(), 1u);
    Completion c[8];
    Deadline dl(Millis(2000));  // keep polling while the server reads and answers
    while (!dl.expired()) (void)g1->transport().cq().wait(c, Millis(50));
  });
  auto g0 = join(store, 0);
  ASSERT_NE(g0, nullptr);
  auto server = PsServer::create(*g0, keys, o, make_sum_updater());
  worker.join();
  ASSERT_FALSE(server.ok());
  const std::string msg = server.status().to_string();
  EXPECT_NE(msg.find("does not hold the 1152921504606846978 keys it announces"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace gw
