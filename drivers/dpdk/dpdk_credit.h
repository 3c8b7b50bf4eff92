/// @file dpdk_credit.h
/// Receiver-driven credits against incast (issue 44). Each sender's loss-driven window is its
/// own; when several peers send into one receiver, their windows add up in the switch queue
/// in front of it, which drops. So the receiver, which sees every sender, shares one budget of
/// packets in flight among the peers that sent it data in the last kActiveNs, and says each
/// one's share in the `wnd` field of every header that carries its acks (the sender caps its
/// window with it; an older peer ignores it). The budget is AIMD on the receiver's own loss
/// signal, the packets that arrive past a hole: cut by a quarter per loss period (from every
/// sender's whole window, ~10 cuts to a switch queue's share), grown by one packet per sender
/// per period without loss — the queue's size is learnt, not configured. With one sender the grant
/// is unlimited: its window alone decides, as before. (After EQDS's receiver-issued credits and
/// NSCC/RCCC in Ultra Ethernet; our own, simpler.)
#pragma once

#include <algorithm>
#include <cstdint>

namespace gw::drv::dpdk {

class RxCredit {
 public:
  static constexpr uint64_t kPeriodNs = 1'000'000;  // how often the budget is adjusted
  static constexpr uint64_t kActiveNs = 2'000'000;  // data this recent: the peer is sending
  static constexpr uint32_t kMinGrant = 8;          // packets per sender, at least
  static constexpr uint32_t kUnlimited = ~0u;
  static constexpr uint32_t kForgetPeriods = 10;  // quiet periods before the budget resets

  /// `window`: one connection's window (packets). The budget starts at every sender's whole
  /// window (no limit until the first loss: a lossless fabric never sees one).
  void init(uint32_t window, bool on) {
    window_ = window;
    budget_ = kUnlimited;
    on_ = on;
  }

  /// Every kPeriodNs from the timers: `active` peers sent data recently; `holes` is the
  /// receiver's count of packets that arrived past a gap (monotonic).
  void tick(uint64_t now, uint32_t active, uint64_t holes) {
    if (now - last_ < kPeriodNs) return;
    last_ = now;
    const bool loss = holes != holes_;
    holes_ = holes;
    if (!on_ || active <= 1) {
      grant_ = kUnlimited;
      // Quiet for a while (a parameter server between rounds): the next burst starts
      // unlimited, not at the last round's cut-down share, and finds the queue again.
      if (++quiet_ >= kForgetPeriods) budget_ = kUnlimited;
      return;
    }
    quiet_ = 0;
    const uint32_t floor = kMinGrant * active, cap = window_ * active;
    budget_ = std::clamp(budget_, floor, cap);
    if (loss) {
      if (++losses_ == 1) budget_ = std::max(floor, budget_ - budget_ / 4);
    } else {
      losses_ = 0;
      budget_ = std::min(cap, budget_ + active);
    }
    if (losses_ >= 2) losses_ = 0;  // a persisting loss cuts again every second period
    grant_ = std::max(kMinGrant, budget_ / active);
  }

  /// The window this receiver grants each sender now (packets).
  uint32_t grant() const { return grant_; }
  uint32_t budget() const { return budget_; }

 private:
  uint32_t window_ = 0, budget_ = 0, grant_ = kUnlimited, losses_ = 0, quiet_ = 0;
  uint64_t last_ = 0, holes_ = 0;
  bool on_ = true;
};

}  // namespace gw::drv::dpdk
