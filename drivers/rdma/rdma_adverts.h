/// @file rdma_adverts.h
/// Receives advertised ahead (rdma.advertise). A receive posted for a specific tag, larger
/// than the eager limit, is advertised to the peer (address, key, length) when no earlier
/// receive could take a message with that tag. A sender with the same-sized message writes
/// straight into it (RDMA WRITE with immediate, no RTS/CTS round trip); otherwise its message
/// goes the usual way and the receiver withdraws the advertisement when that message matches.
/// The only race, messages already under way when the receiver posted, is settled by counts:
/// the advertisement carries how many eager/RTS messages the receiver had matched; the sender
/// remembers its recent ones (rdma_adverts.cc).
/// Thread-safety: none; a part of its RdmaEndpoint.
#pragma once

#include <cstdint>

#include "rdma_endpoint_state.h"

namespace gw::drv::rdma {

class RdmaEndpoint;

class Adverts {
 public:
  explicit Adverts(RdmaEndpoint& ep) : ep_(ep) {}
  void init(uint32_t max_outstanding);

  // --- receiver ---
  /// Advertises posted receive i (core recvs()) when no earlier receive could take its
  /// messages, so the sender may write into it without a request/clear-to-send round trip.
  void offer(int i);
  /// A header claimed the receive advertised in rendezvous slot `s` the usual way: withdraw it.
  void withdraw(uint32_t s);
  /// The first stripe of a direct write into advertised slot `s` arrived.
  void claim(uint32_t s);
  /// An eager or RTS header matched (the count advertisements carry).
  void matched() { ++matched_; }

  // --- sender ---
  void on_advert(const MsgHdr& h);
  /// Send slot `s` may go straight into an advertised receive (queues the write and returns
  /// true), else it is a normal message (recorded for later advertisements).
  bool use(uint32_t s, const SendRequest& r, bool rendezvous);
  /// Records a message sent without an advertisement (an advertisement made before it
  /// arrives is its receive).
  void under_way(uint64_t tag) {
    if (orphans_.full()) {
      orphan_floor_ = orphans_.front().index + 1;
      orphans_lost_ = true;
      orphans_.pop();
    }
    orphans_.push(Orphan{queued_++, tag, false});
  }
  /// An eager message: only recorded (it never takes an advertisement, but uses up its tag's).
  void eager(const SendRequest& r) {
    if (adverts_.empty())
      under_way(r.tag);
    else
      use(0, r, false);
  }

 private:
  struct Orphan {  // an eager/RTS message sent, index = its count
    uint32_t index = 0;
    uint64_t tag = 0;
    bool claimed = false;
  };
  struct Advert {
    uint64_t tag = 0, len = 0, addr = 0;
    uint32_t rkey = 0, slot = 0;
    uint8_t stripes = 1;
    bool dead = false;
  };

  RdmaEndpoint& ep_;
  // Receiver: eager+RTS headers matched so far, advertisements outstanding.
  uint32_t matched_ = 0, out_ = 0;
  // Sender: eager+RTS messages queued so far, the recent ones, the usable advertisements.
  uint32_t queued_ = 0, orphan_floor_ = 0;
  bool orphans_lost_ = false;
  Ring<Orphan> orphans_;
  Ring<Advert> adverts_;
};

}  // namespace gw::drv::rdma
