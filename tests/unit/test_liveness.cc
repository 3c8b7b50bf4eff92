// The heartbeat bookkeeping of tcp and rdma (gw_liveness.h): when a peer's silence names it,
// when a heartbeat is due, when a transport's pass runs.
#include <gtest/gtest.h>

#include "gw_liveness.h"

namespace gw::core {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kTimeout = 1500 * kMs, kEvery = 100 * kMs;

TEST(PeerLiveness, SilenceCountsOnlyForALivePeerWithRequestsPending) {
  PeerLiveness p;
  uint64_t t = 1000 * kMs;
  EXPECT_FALSE(p.silent(t, true, kTimeout));  // first pass: the clock starts
  // A peer that never said its thread runs (caller mode) is never timed out.
  EXPECT_FALSE(p.silent(t + 10 * kTimeout, true, kTimeout));
  p.peer_says(true);
  p.heard();
  t += 10 * kTimeout;
  EXPECT_FALSE(p.silent(t, true, kTimeout));                    // heard: the clock restarts
  EXPECT_FALSE(p.silent(t + kTimeout, true, kTimeout));         // exactly the timeout: not yet
  EXPECT_FALSE(p.silent(t + kTimeout + kMs, false, kTimeout));  // nothing waits on it
  EXPECT_TRUE(p.silent(t + kTimeout + kMs, true, kTimeout));
  EXPECT_EQ(p.silent_ms(t + kTimeout + kMs), 1501u);
  const std::string e =
      p.silence(t + kTimeout + kMs, "tcp: peer rank 3", kEvery, "tcp.peer_timeout_ms");
  EXPECT_NE(e.find("tcp: peer rank 3 sent nothing for 1501 ms"), std::string::npos) << e;
  EXPECT_NE(e.find("every 100 ms (tcp.peer_timeout_ms)"), std::string::npos) << e;
  // A late heartbeat rescues it; a peer whose thread stopped (it said so) is not timed out.
  p.heard();
  EXPECT_FALSE(p.silent(t + 2 * kTimeout, true, kTimeout));
  p.peer_says(false);
  EXPECT_FALSE(p.silent(t + 10 * kTimeout, true, kTimeout));
}

TEST(PeerLiveness, BeatsEveryPeriodWhileLiveAndOnceWhenThatChanges) {
  PeerLiveness p;
  const uint64_t t = 5000 * kMs;
  EXPECT_FALSE(p.beat_due(t, false, kEvery));  // caller mode from the start: nothing to say
  EXPECT_TRUE(p.beat_due(t, true, kEvery));    // the thread started
  p.beat_sent(t, true);
  EXPECT_FALSE(p.beat_due(t + kEvery - 1, true, kEvery));
  EXPECT_TRUE(p.beat_due(t + kEvery, true, kEvery));
  p.beat_sent(t + kEvery, true);
  EXPECT_TRUE(p.beat_due(t + kEvery + 1, false, kEvery));  // the thread stopped: say so once
  p.beat_sent(t + kEvery + 1, false);
  EXPECT_FALSE(p.beat_due(t + 100 * kEvery, false, kEvery));
}

TEST(LivenessTick, EveryTenMillisecondsOrWhenTheThreadStartsOrStops) {
  LivenessTick k;
  const uint64_t t = 7000 * kMs;
  EXPECT_TRUE(k.due(false, t));
  EXPECT_FALSE(k.due(false, t + 9 * kMs));
  EXPECT_TRUE(k.due(true, t + 9 * kMs));  // started
  EXPECT_TRUE(k.live());
  EXPECT_FALSE(k.due(true, t + 18 * kMs));
  EXPECT_TRUE(k.due(true, t + 20 * kMs));
  EXPECT_TRUE(k.due(false, t + 21 * kMs));  // stopped
  EXPECT_FALSE(k.live());
}

}  // namespace
}  // namespace gw::core
