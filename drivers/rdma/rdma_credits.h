/// @file rdma_credits.h
/// Eager SEND credits of one endpoint and their return. Every SEND and every WRITE with
/// immediate on lane 0 consumes one of the peer's receive buffers: the sender holds a credit
/// for each. Receivers repost when a poll finds nothing and return credits in every header
/// (MsgHdr::posted) and, once the sender may be down to half of them, by an RDMA WRITE of
/// their posted-count into the sender's credit word (needs no credit); while no poll comes up
/// empty, at a quarter. Counts wrap at 2^32.
/// Thread-safety: none; a part of its RdmaEndpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rdma_device.h"

namespace gw::drv::rdma {

/// Words the peer RDMA-writes.
struct alignas(64) CreditWords {
  volatile uint32_t peer_posted;  // written by the peer
  uint32_t my_posted;             // source of our credit WRITE
};

class Credits {
 public:
  /// Credits eager and RTS messages leave for control messages (post_msg).
  static constexpr int32_t kCtrl = 1;

  /// The credit words, registered on `pd`. @return ResourceExhausted/SystemError.
  Status init(ibv_pd* pd, uint32_t recv_depth, const std::string& dev);
  /// The peer's Hello: its receive buffers and where its credit word is.
  void connect(uint32_t peer_depth, uint64_t addr, uint32_t rkey);
  uint32_t rkey() const { return mr_->rkey; }
  uint64_t addr() const { return reinterpret_cast<uintptr_t>(words_.get()); }

  /// Credits this side holds: what the peer posted (header or credit word) minus what was sent.
  int32_t available() const {
    uint32_t pp = peer_posted_, w = words_->peer_posted;
    if (static_cast<int32_t>(w - pp) > 0) pp = w;
    return static_cast<int32_t>(pp - sent_);
  }
  /// The peer may hold `n` credits or fewer: what we told it minus what arrived.
  bool peer_below(int32_t n) const { return static_cast<int32_t>(told_ - consumed_) <= n; }
  bool below_quarter() const { return peer_below(quarter_); }
  /// An explicit credit WRITE is due: reposted buffers not yet told and the peer may be down
  /// to half its credits. A ping-pong makes one per recv_depth/2 messages, when idle.
  bool due() const { return posted_ != told_ && peer_below(half_) && peer_rkey_ != 0; }

  void sent() { ++sent_; }          // one of the peer's buffers taken
  void consumed() { ++consumed_; }  // the peer took one of ours
  void posted(uint32_t n) { posted_ += n; }
  uint32_t posted() const { return posted_; }
  void told() { told_ = posted_; }  // a header or credit WRITE carried posted()
  /// A header's posted-count (wrapping: only a newer one counts).
  void heard(uint32_t p) {
    if (static_cast<int32_t>(p - peer_posted_) > 0) peer_posted_ = p;
  }
  /// Fills the credit WRITE's target into `wr`; @return its source (4 bytes, registered).
  ibv_sge write(ibv_send_wr* wr);

 private:
  std::unique_ptr<CreditWords> words_;
  MrPtr mr_;
  uint32_t posted_ = 0, told_ = 0, peer_posted_ = 0, sent_ = 0;
  uint32_t consumed_ = 0;           // lane 0's receive buffers taken by the peer's messages
  int32_t half_ = 1, quarter_ = 1;  // recv_depth / 2 and / 4 (at least 1)
  uint64_t peer_addr_ = 0;
  uint32_t peer_rkey_ = 0;
};

}  // namespace gw::drv::rdma
