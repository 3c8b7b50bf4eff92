/// @file gw_endpoint_core.h
/// The transport core's per-endpoint half: posted receives, messages in flight, the sticky
/// error (matching rule: gw_core.h). Its hot paths are inline in gw_core_inl.h.
#pragma once

#include <vector>

#include "gw_transport_core.h"

namespace gw::core {

/// Per endpoint: its posted receives, its messages in flight, its sticky error.
class EndpointCore {
 public:
  EndpointCore() = default;
  EndpointCore(const EndpointCore&) = delete;
  EndpointCore& operator=(const EndpointCore&) = delete;
  ~EndpointCore();
  /// At connect time: `max_recvs` posted receives, `max_msgs` messages in flight, of which
  /// at most `max_unexpected` buffered (0: max_msgs).
  void init(TransportCore* t, Endpoint* ep, size_t max_recvs, size_t max_msgs,
            RecvHooks* hooks = nullptr, size_t max_unexpected = 0);
  /// Whether any-source receives may take this endpoint's messages (rdma: not before the
  /// caller has its endpoint, peer id and all).
  void set_any_source(bool on) { any_source_ = on; }

  // --- completions ---
  /// One completion for a request this endpoint accepts; false when the CQ is full.
  bool reserve() {
    if (!t_->sink_.reserve()) return false;
    ++outstanding_;
    return true;
  }
  /// Gives back one reservation of a request not taken after all.
  void unreserve() {
    t_->sink_.unreserve(1);
    --outstanding_;
  }
  void complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code) {
    t_->sink_.push(Completion{wr_id, tag, len, ep_, ep_->peer_id(), op, code});
    --outstanding_;
  }

  // --- errors ---
  const Status& error() const { return error_; }
  bool failed() const { return !error_.ok(); }
  /// Why post_send must refuse now: the sticky error, else a requested abort; OK: accept.
  /// One acquire load per burst.
  const Status& refusal() const {
    return failed() || !t_->abort_.requested() ? error_ : t_->abort_.status();
  }
  /// Record the sticky error and log it: debug for an orderly close with nothing pending,
  /// else warn. False if the endpoint had failed already (do nothing more).
  bool set_error(const Status& st, bool orderly, bool sends_pending);
  /// Complete every posted receive and message in flight with `code`, except messages
  /// `keep(m)` says stay receivable (a peer that left in order).
  template <class Keep>
  void fail_receives(Code code, Keep keep);
  /// The endpoint-error event; the last completion of a failed endpoint.
  void report_error() {
    t_->sink_.push(Completion{0, 0, 0, ep_, ep_->peer_id(), Op::kEndpointError, error_.code()});
    event_reserved_ = false;
  }

  // --- receives ---
  /// Post receives: each takes a buffered message or waits. `prep(r)` is the driver's check
  /// of one request (OK to take it); `posted(i)` sees each that waits (its index in
  /// recvs()); on a failed endpoint a receive is still taken if a buffered message or
  /// `waiting(tag)` (one the driver holds in the network) may match it.
  template <class Prep, class OnPosted = NoPosted, class Waiting = NotWaiting>
  Result<size_t> post_recv(std::span<const RecvRequest> reqs, Prep prep, OnPosted posted = {},
                           Waiting waiting = {});
  /// The peer's next message (in send order) begins: match it. @return its slot, or -1 when
  /// it must wait in the network (no slot, no unexpected budget: back-pressure). `defer`:
  /// its bytes are not sent yet (rdma's rendezvous request): buffered, it holds no budget
  /// and no buffer (base null) until the driver gives it some.
  int begin(uint64_t seq, uint64_t tag, uint64_t len, bool defer = false);
  /// Every byte of message m is in place.
  void finish(int m);
  /// The receive matched to m cannot take it (e.g. no staging for its memory): complete it
  /// with `code` and drop the message's bytes.
  void reject(int m, Code code);
  void release(int m);
  InMsg& msg(int m) { return msgs_[static_cast<size_t>(m)]; }
  const InMsg& msg(int m) const { return msgs_[static_cast<size_t>(m)]; }
  int max_msgs() const { return static_cast<int>(msgs_.size()); }
  /// Oldest unclaimed buffered message with this tag (kAnyTag: any); -1 if none.
  int find_unexpected(uint64_t tag) const;
  /// The active message with sequence number `seq`; -1 if none.
  int find_active(uint64_t seq) const;
  bool has_pending() const;
  size_t posted() const { return recvs_.size(); }
  /// The posted receives, in posting order (drivers read them and set cookies).
  SlotList<Posted>& recvs() { return recvs_; }
  /// Takes posted receive i out of matching: the driver's peer wrote into it directly (rdma's
  /// advertised receives). Its completion stays reserved; the driver completes it.
  RecvRequest claim_posted(int i) {
    const RecvRequest r = recvs_[i].req;
    recvs_.erase(i);
    return r;
  }

 private:
  friend class TransportCore;
  void bind(int m, const RecvRequest& r);
  void deliver(int m);

  TransportCore* t_ = nullptr;
  Endpoint* ep_ = nullptr;
  RecvHooks* hooks_ = nullptr;
  Status error_;
  SlotList<Posted> recvs_;
  std::vector<InMsg> msgs_;
  std::vector<int> free_;
  SlotList<int> unexp_;          // unclaimed unexpected messages (slots), oldest first
  size_t outstanding_ = 0;       // completions reserved by this endpoint, not yet pushed
  bool event_reserved_ = false;  // its endpoint-error event, not yet pushed
  bool any_source_ = true;
};

}  // namespace gw::core

#include "gw_core_inl.h"  // the hot paths, inline
