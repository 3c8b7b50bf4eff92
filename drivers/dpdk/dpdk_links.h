/// @file dpdk_links.h
/// Several ports per transport (`dpdk.ifaces`): link k of one rank faces link k of its peer
/// (same network). One connection keeps one sequence space and sprays its packets over the
/// links: each packet goes on the live link with the fewest of the connection's packets in
/// flight, so a slower link takes fewer (weighted by what each delivers). A link none of whose
/// packets is acknowledged for `dpdk.link_timeout_ms` while it carries data is taken out (per
/// connection and direction): its packets in flight are sent again on the others, without the
/// loss response of the window. A link taken out is probed (kProbe, answered on the same link)
/// every `dpdk.link_probe_ms` and carries again once a probe comes back.
/// Thread-safety: none (the transport's thread).
#pragma once

#include <rte_ether.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace gw::drv::dpdk {

class Port;

/// Most ports one transport drives (the bed gives a host 1..4 links).
inline constexpr int kMaxLinks = 4;

/// A port beyond the first: link 1.. of the transport. The first is DpdkTransport::port_.
struct LinkPort {
  std::unique_ptr<Port> port;
  rte_ether_addr mac{};
  std::vector<struct rte_mbuf*> txq;
};

/// One connection's view of its links (sending direction).
class EpLinks {
 public:
  void init(int n) { n_ = static_cast<uint8_t>(n < 1 ? 1 : n > kMaxLinks ? kMaxLinks : n); }
  int n() const { return n_; }
  bool many() const { return n_ > 1; }
  bool dead(int k) const { return l_[k].dead; }
  uint32_t inflight(int k) const { return l_[k].inflight; }

  /// The live link with the fewest packets in flight (ties: in turn).
  uint8_t pick() {
    int best = -1;
    for (int i = 0; i < n_; ++i) {
      const int k = (rr_ + i) % n_;
      if (!l_[k].dead && (best < 0 || l_[k].inflight < l_[best].inflight)) best = k;
    }
    rr_ = static_cast<uint8_t>((rr_ + 1) % n_);
    return static_cast<uint8_t>(best < 0 ? 0 : best);
  }
  /// A live link for control frames, preferring `k` (where the peer's data last came in).
  uint8_t control(uint8_t k) const {
    if (k < n_ && !l_[k].dead) return k;
    for (uint8_t i = 0; i < n_; ++i)
      if (!l_[i].dead) return i;
    return 0;
  }
  /// A packet left on link k.
  void sent(uint8_t k, uint64_t now) {
    if (idle_at_) resume(now);
    Link& l = l_[k];
    ++l.inflight;
    if (!l.waiting) {
      l.waiting = true;
      l.since = now;
    }
  }
  /// A packet on link k left it: sent again elsewhere (`acked` false) or acknowledged at `now`.
  void left(uint8_t k, bool acked, uint64_t now = 0) {
    Link& l = l_[k];
    if (l.inflight) --l.inflight;
    if (acked) {
      l.waiting = false;
      l.acked_at = now;
    }
  }
  /// Every packet of the connection is acknowledged at `now`. A link whose packets were all
  /// sent again elsewhere still owes its ack: its clock stops until the connection sends again
  /// (clearing it let a cut link live as long as loss recovery kept draining the connection).
  void idle(uint64_t now) {
    if (!idle_at_) idle_at_ = now;
  }
  /// A link that owed an ack for `timeout` ns of busy time while another link's packets were
  /// acknowledged (a peer that acknowledges nothing is stopped or gone: the peer timeout's
  /// business); -1: none. The last live link is never one.
  int overdue(uint64_t now, uint64_t timeout) const {
    if (idle_at_) now = idle_at_;  // the clocks stand while nothing is in flight
    int live = 0;
    for (int k = 0; k < n_; ++k) live += !l_[k].dead;
    for (int k = 0; live > 1 && k < n_; ++k) {
      const Link& l = l_[k];
      if (l.dead || !l.waiting || now - l.since <= timeout) continue;
      for (int j = 0; j < n_; ++j)
        if (j != k && !l_[j].dead && l_[j].acked_at > l.since) return k;
    }
    return -1;
  }
  void set_dead(int k, uint64_t now) {
    l_[k].dead = true;
    l_[k].waiting = false;
    l_[k].next_probe = now;
  }
  void set_live(int k) { l_[k].dead = false; }
  /// Nothing of the connection's is on link k any more (its count went stale).
  void clear(int k) { l_[k].inflight = 0; }
  /// A dead link due for a probe at `now` (its next one `period` later); -1: none.
  int probe_due(uint64_t now, uint64_t period) {
    for (int k = 0; k < n_; ++k) {
      if (l_[k].dead && now >= l_[k].next_probe) {
        l_[k].next_probe = now + period;
        return k;
      }
    }
    return -1;
  }
  void reset() {
    for (auto& l : l_) l = Link{};
    idle_at_ = 0;
  }

 private:
  struct Link {
    uint32_t inflight = 0;
    uint64_t since = 0;     // first send on this link since one of its packets was last acked
    uint64_t acked_at = 0;  // when one of its packets was last acknowledged
    uint64_t next_probe = 0;
    bool waiting = false, dead = false;
  };
  /// The connection sends again: owing links' clocks skip the idle time.
  void resume(uint64_t now) {
    for (int k = 0; k < n_; ++k)
      if (l_[k].waiting) l_[k].since += now - idle_at_;
    idle_at_ = 0;
  }
  Link l_[kMaxLinks];
  uint64_t idle_at_ = 0;  // when every packet was last acknowledged; 0: busy
  uint8_t n_ = 1, rr_ = 0;
};

}  // namespace gw::drv::dpdk
