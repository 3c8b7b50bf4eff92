// The receiver's incast budget (drivers/dpdk/dpdk_credit.h): unlimited for one sender or when
// off; cut by a quarter per loss period down to kMinGrant per sender; grown by one packet per
// sender per period without loss; forgotten after a quiet spell; the end-to-end effect is
// usertools/gw-incast.sh's table.
#include <gtest/gtest.h>

#include "dpdk_credit.h"

namespace gw::drv::dpdk {
namespace {

constexpr uint64_t kP = RxCredit::kPeriodNs;

TEST(DpdkCredit, OneSenderOrOffIsUnlimited) {
  RxCredit c, off;
  c.init(1024, true);
  off.init(1024, false);
  uint64_t holes = 0;
  for (uint64_t t = 1; t <= 50; ++t) {
    holes += 10;  // losses every period
    c.tick(t * kP, 1, holes);
    off.tick(t * kP, 7, holes);
    EXPECT_EQ(c.grant(), RxCredit::kUnlimited) << t;
    EXPECT_EQ(off.grant(), RxCredit::kUnlimited) << t;
  }
}

TEST(DpdkCredit, LosslessSendersKeepTheirWholeWindow) {
  RxCredit c;
  c.init(1024, true);
  for (uint64_t t = 1; t <= 100; ++t) {
    c.tick(t * kP, 7, 0);
    EXPECT_EQ(c.grant(), 1024u) << t;
  }
}

TEST(DpdkCredit, LossCutsToAShareThenGrowsBack) {
  RxCredit c;
  c.init(1024, true);
  uint64_t t = 1, holes = 0;
  c.tick(t++ * kP, 7, holes);
  EXPECT_EQ(c.budget(), 7 * 1024u);  // no limit before a loss: every sender's whole window
  // Loss in every period: a quarter off in every second one (one cut per loss episode's
  // round trip), down to the floor: 7168 * 0.75^17 < 56.
  uint32_t prev = c.budget();
  for (int i = 0; i < 6; ++i) {
    c.tick(t++ * kP, 7, ++holes);
    EXPECT_EQ(c.budget(), i % 2 ? prev : prev - prev / 4) << i;
    prev = c.budget();
  }
  for (int i = 0; i < 200; ++i) c.tick(t++ * kP, 7, ++holes);
  EXPECT_EQ(c.budget(), 7 * RxCredit::kMinGrant);
  EXPECT_EQ(c.grant(), RxCredit::kMinGrant);
  for (int i = 0; i < 10; ++i) c.tick(t++ * kP, 7, holes);  // no loss: +1 per sender per period
  EXPECT_EQ(c.budget(), 7 * RxCredit::kMinGrant + 70);
  EXPECT_EQ(c.grant(), (7 * RxCredit::kMinGrant + 70) / 7);
  c.tick(t++ * kP, 7, ++holes);  // one loss: a quarter off
  EXPECT_EQ(c.budget(), 126 - 126 / 4);
  c.tick(t * kP + 1, 7, ++holes);  // within the same period: nothing changes
  EXPECT_EQ(c.budget(), 126 - 126 / 4);
}

TEST(DpdkCredit, FewerSendersRaiseTheShare) {
  RxCredit c;
  c.init(256, true);
  uint64_t t = 1, holes = 0;
  for (int i = 0; i < 100; ++i) c.tick(t++ * kP, 8, ++holes);
  const uint32_t b = c.budget();
  c.tick(t++ * kP, 2, holes);  // 6 senders went quiet, no loss
  EXPECT_EQ(c.grant(), (b + 2) / 2);
  EXPECT_GT(c.grant(), b / 8);
}

// A parameter server's rounds: the budget cut in one push round is forgotten after kForget
// quiet periods, so the next round does not start at the last one's share.
TEST(DpdkCredit, QuietPeriodsForgetTheCut) {
  RxCredit c;
  c.init(1024, true);
  uint64_t t = 1, holes = 0;
  for (int i = 0; i < 40; ++i) c.tick(t++ * kP, 7, ++holes);
  ASSERT_LT(c.budget(), 7 * 1024u / 4);
  const uint32_t cut = c.budget();
  for (uint32_t i = 0; i + 1 < RxCredit::kForgetPeriods; ++i) c.tick(t++ * kP, 0, holes);
  c.tick(t++ * kP, 7, holes);  // a short pause: the share is kept (and grows by 7)
  EXPECT_EQ(c.budget(), cut + 7);
  for (uint32_t i = 0; i < RxCredit::kForgetPeriods; ++i) c.tick(t++ * kP, 1, holes);
  c.tick(t++ * kP, 7, holes);
  EXPECT_EQ(c.budget(), 7 * 1024u);  // forgotten: every sender's whole window again
  EXPECT_EQ(c.grant(), 1024u);
}

}  // namespace
}  // namespace gw::drv::dpdk
