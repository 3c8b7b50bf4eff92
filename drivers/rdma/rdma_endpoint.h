/// @file rdma_endpoint.h
/// One peer over one RC queue pair. Messages up to rdma.eager_bytes go eagerly: header and
/// payload are copied into a registered send buffer (inline when small) and SENT into one of
/// the peer's pre-posted receive buffers. Larger ones use rendezvous: RTS, the receiver
/// matches it and answers CTS with its buffer's address and rkey, the sender RDMA-WRITEs
/// (the last chunk with immediate, which completes the receive). Every SEND and WRITE with
/// immediate uses one of the peer's receive buffers: the sender holds a credit for each;
/// receivers repost when a poll finds nothing and return credits in every header and, once
/// the sender may be down to half of them, by an RDMA WRITE of their posted-count into the
/// sender's credit word (needs no credit); while no poll comes up empty, at a quarter.
/// Outgoing work goes through one ordered software queue, so a lack of credits or send queue
/// room only delays it; an eager send with nothing queued ahead skips it (send_now). With
/// rdma.qps_per_conn > 1 the connection has more queue pairs ("lanes"): lane 0 carries every
/// SEND (so matching keeps the send order) and its share of rendezvous data; the others carry
/// only rendezvous stripes, and pre-post one empty receive per rendezvous slot, so their
/// WRITEs with immediate never need credits.
/// Thread-safety: none; owned by the caller, driven by its RdmaTransport.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gw_core.h"
#include "rdma_endpoint_state.h"
#include "rdma_transport.h"

namespace gw::drv::rdma {

/// A MemoryRegion sharing a cache entry; its death invalidates the range in the cache.
/// `cuda`: the GPUDirect path for MemKind::kCudaDevice memory (see RegCache::acquire).
Result<MemoryRegion> make_region(RegCache& cache, void* addr, size_t len, MemKind kind,
                                 const GpuPath* cuda = nullptr);
/// The cache entry behind a region made by make_region; null for none (or length 0).
RegCache::Entry* region_entry(const MemoryRegion* mr);

class RdmaEndpoint final : public Endpoint, private core::RecvHooks {
 public:
  RdmaEndpoint(RdmaTransport* t, uint32_t id);
  ~RdmaEndpoint() override;

  Result<size_t> post_send(std::span<const SendRequest> reqs) override;
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override;
  Status status() const override { return core_.error(); }

  // --- set-up (rdma_endpoint.cc) ---
  /// QP in INIT, buffers registered, receives posted. @return ResourceExhausted/SystemError.
  Status create();
  Hello local_hello(uint64_t key) const;
  /// Moves the QP to RTR and RTS toward `remote`. @return ProtocolError/SystemError.
  Status connect_qp(const Hello& remote, const std::string& who);
  void bind(const ConnectParams& p, Fd ctrl);
  int ctrl_fd() const { return ctrl_.get(); }
  // --- liveness (rdma_liveness.cc) ---
  /// What the control connection brought: heartbeats, or EOF (the peer is gone).
  void read_ctrl();
  /// Every ~10 ms: a heartbeat out while `live` (this transport's progress thread runs), and
  /// the peer's silence judged.
  void liveness(uint64_t now, bool live);
  uint32_t id() const { return id_; }
  uint32_t qpn() const { return lanes_.empty() ? 0 : lanes_[0].qp->qp_num; }
  /// Queue pair of `lane` (null past the last): for tests that speak raw verbs to a peer.
  ibv_qp* qp(size_t lane) const { return lane < lanes_.size() ? lanes_[lane].qp.get() : nullptr; }
  size_t lanes() const { return lanes_.size(); }
  /// Completion-queue entries this endpoint may occupy (fixed at create()).
  int cq_entries() const { return cq_entries_; }

  // --- data path (rdma_progress.cc) ---
  void on_wc(const ibv_wc& wc, WrKind kind, uint32_t idx);
  void flush();
  /// Work for flush(). Receive reposts and credits wait for an idle poll (idle_work()), so
  /// they are not on the way to the caller's next completion, unless the peer may be down to
  /// a quarter of its credits.
  bool has_tx() const {
    return !txq_.empty() || (peer_below(credit_quarter_) && (rstaged_ > 0 || credit_due())) ||
           copies_in_ > 0 || !starved_.empty() || !held_.empty();
  }
  bool idle_work() const { return rstaged_ > 0; }
  /// Fails every pending request and the endpoint. `orderly`: the peer left cleanly, so
  /// messages that arrived whole and wait for their receive stay receivable, and the failure
  /// warns only if it lost work (core::log_failure).
  void fail(const Status& st, bool orderly = false);
  /// Messages wait in their receive buffers: the unexpected budget was spent (back-pressure;
  /// the peer's credits run down). retry_held() matches them once receives are posted.
  bool held() const { return !held_.empty(); }
  void retry_held();
  bool failed() const { return core_.failed(); }
  /// A post took a buffered message since the last call (flush: its answer goes out now).
  bool take_took() { return std::exchange(took_, false); }

 private:
  using SendSlot = ep_state::SendSlot;
  static constexpr uint32_t kNoSlot = ep_state::kNoSlot;
  using RndvRecv = ep_state::RndvRecv;
  using Held = ep_state::Held;
  using TxItem = ep_state::TxItem;

  void on_recv(const ibv_wc& wc, uint32_t slot);
  /// @return false: the message stays in receive buffer `slot` (held_).
  bool on_header_msg(const ibv_wc& wc, const uint8_t* buf, uint32_t slot);
  void hold(const MsgHdr& h, uint32_t slot, uint32_t off);
  /// A held message has this tag (kAnyTag: any).
  bool held_tag(uint64_t tag);
  /// An eager or RTS message the core matched (core message m): deliver it, or buffer it.
  void arrived(int m, MsgType type, const uint8_t* payload, uint32_t send_id);
  // core::RecvHooks: a buffered message into its receive (CUDA memory: a copy), and a
  // rendezvous request claimed before its data came (answered now).
  bool copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) override;
  void claimed(int m) override;
  [[gnu::cold, gnu::noinline]] void recv_failed(const ibv_wc& wc);
  [[gnu::cold, gnu::noinline]] void compact_too_long(uint32_t len);
  /// A rendezvous stripe landed (WRITE with immediate on any lane). @return false on error.
  bool on_write_imm(uint32_t imm);
  void on_lane_recv(const ibv_wc& wc, uint32_t lane);
  /// @return false: an eager message the unexpected budget cannot take now (or one behind
  /// such): it stays in its receive buffer (held_), not reposted.
  bool on_message(const MsgHdr& h, const uint8_t* payload);
  /// Queues the RDMA WRITEs of send slot `s` into the peer's receive slot `rslot` at
  /// addr/rkey, striped over `stripes` lanes. The caller checks txq_ room.
  /// A window (kWin) asks for `len` bytes from offset `base` only.
  void queue_write(uint32_t s, uint32_t rslot, uint64_t addr, uint32_t rkey, uint8_t stripes,
                   uint64_t base = 0, uint64_t len = UINT64_MAX);
  /// A WRITE with immediate of send slot `s` completed.
  void stripe_written(uint32_t s);
  // --- CUDA memory without GPUDirect (rdma_staging.cc) ---
  /// The endpoint's pinned buffers (one pool per direction), made and registered on first
  /// use (logged).
  Status ensure_pool();
  /// post_write for a staged send: copies out ahead, writes each buffer once copied.
  bool post_write_staged(TxItem& it);
  /// Receiver: rendezvous into CUDA memory; asks for windows into free buffers.
  void start_staged_recv(const RecvRequest& r, uint64_t tag, uint64_t len, uint32_t send_id);
  /// @return true while `r` has bytes that got no window (out of buffers).
  bool request_windows(uint32_t r);
  /// The oldest window of staged receive `r` landed: copy it in. @return false on error.
  bool window_landed(uint32_t r);
  /// Finishes copies that completed; feeds starved receives.
  void poll_staging();
  void on_staged_wc(const ibv_wc& wc, uint32_t idx);
  /// Eager payload into CUDA memory (a synchronous copy). @return the copy's status.
  Status copy_to_device(void* dst, const uint8_t* payload, size_t len);
  void update_busy();
  void reset_staging();
  /// Stripes (lanes) a rendezvous of `len` bytes is spread over.
  uint8_t stripes_for(uint64_t len) const;
  // --- unexpected rendezvous (rdma_recv.cc) ---
  /// Within rdma.unexpected_bytes, answers buffered RTS m at once with a bounce buffer (the
  /// core message's), so the send completes before its receive is posted (as over TCP);
  /// else it waits for its receive.
  void pull(int m);
  /// A pulled message's last stripe landed in slot `r`'s bounce buffer.
  void landed(uint32_t r);
  // --- receives advertised ahead (rdma_recv.cc) ---
  /// Receiver: advertises posted receive i (core recvs()) to the peer when no earlier receive
  /// could take its messages, so the sender may write into it without a request/clear-to-send
  /// round trip.
  void init_adverts();
  void maybe_advertise(int i);
  /// Receiver: a header claimed the receive advertised in slot `s` the usual way: withdraw it.
  void unadvertise(uint32_t s);
  /// Receiver: the first stripe of a direct write into advertised slot `s` arrived.
  bool claim_by_write(uint32_t s);
  /// Sender: an advertisement arrived.
  void on_advert(const MsgHdr& h);
  /// Sender: send slot `s` may go straight into an advertised receive (queues the write and
  /// returns true), else it is a normal message (recorded for later advertisements).
  bool use_advert(uint32_t s, const SendRequest& r, bool rendezvous);
  /// Sender: records a message sent without an advertisement (an advertisement made before it
  /// arrives is its receive).
  void under_way(uint64_t tag);
  /// A compact eager message (no header): matched and, in the common case (a posted host
  /// receive large enough, not advertised), copied straight in. @return false: hold it.
  bool deliver_eager(uint64_t tag, const uint8_t* payload, uint32_t len);
  /// Deliver an arrived message to receive `r` (eager payload or rendezvous request).
  void deliver(const RecvRequest& r, MsgType type, uint64_t tag, uint64_t len,
               const uint8_t* payload, uint32_t send_id);
  void complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code);
  /// Tells the sender its rendezvous request was delivered to a receive too small for it.
  void reject_rts(uint32_t send_id);
  void finish_send(uint32_t s, Code code);
  /// The common eager send: a compact message (rdma_wire.h), nothing queued before it, credit
  /// and room at hand, staged at once. Within the inline limit it needs no send slot or
  /// transmit buffer (the device copies inline data when posted) and completes now; above it,
  /// from registered memory, it is sent from the caller's buffer and completes with its SEND.
  /// @return false to take the queued path (copy into a transmit buffer).
  bool send_now(const SendRequest& r);
  /// Stages send slot `s` (a compact eager message in registered memory, key `lkey`) as one
  /// signalled SEND with immediate from the caller's buffer; it completes with that SEND.
  void stage_compact(uint32_t s, uint32_t lkey);
  bool post_msg(const TxItem& it);
  bool post_write(TxItem& it);
  void post_credit();
  // Checked on every progress pass (has_tx): inline, cheapest test first.
  /// The peer may hold `n` credits or fewer: what we told it minus what arrived.
  bool peer_below(int32_t n) const { return static_cast<int32_t>(advertised_ - consumed_) <= n; }
  /// An explicit credit WRITE (in flush()): reposted buffers not yet told and the peer may be
  /// down to half its credits. A ping-pong makes one per recv_depth/2 messages, when idle.
  bool credit_due() const {
    return posted_ != advertised_ && peer_below(credit_half_) && peer_credit_rkey_ != 0 &&
           !failed();
  }
  /// Due now, even between a message and the caller's answer: down to a quarter.
  bool credit_urgent() const { return peer_below(credit_quarter_) && credit_due(); }
  int32_t credits() const;
  /// Credits eager and RTS messages leave for control messages (post_msg).
  static constexpr int32_t kCtrlCredits = 1;
  // --- posting (rdma_send.cc) ---
  void init_posting();
  /// Stages lane 0's receive buffer `slot` (consumed, so not staged already); post_recvs()
  /// posts the staged ones.
  void repost(uint32_t slot);
  void post_recvs();
  void repost_lane(uint32_t lane);
  bool room(uint32_t lane) const;
  /// Adds `wr` (with `sge`) to lane `l`'s chain; `msg`: it uses a transmit buffer.
  void stage(uint32_t l, const ibv_send_wr& wr, const ibv_sge& sge, bool msg, bool must_signal);
  /// stage() in place: the next work request of lane `l` with its sge, chaining and signal
  /// flag set; the caller fills in the rest (fields it leaves are stale).
  ibv_send_wr& next_wr(uint32_t l, const ibv_sge& sge, bool msg, bool must_signal);
  void post_staged(uint32_t l);
  /// A signalled send completion on lane `l`: retires it and the unsignalled ones before it.
  void retire(uint32_t l);
  /// Creates lane `i`'s queue pair in INIT. @return ResourceExhausted/SystemError.
  Status create_lane(uint32_t i, uint32_t recv_depth);
  Status protocol_error(const std::string& what);
  /// Fails the endpoint: verbs call `call` on queue pair `lane` returned `rc`. Out of line and
  /// cold, so the posting functions stay small.
  [[gnu::cold, gnu::noinline]] void fail_verbs(const char* call, uint32_t lane, int rc);
  Status wc_error(const ibv_wc& wc, const char* what) const;

  RdmaTransport* t_;
  uint32_t id_;
  // Posted receives, buffered messages, completions, the sticky error (gw_core.h).
  core::EndpointCore core_;
  bool took_ = false;
  Fd ctrl_;
  CtrlItem ctrl_item_;
  core::PeerLiveness live_;                  // heartbeats on ctrl_ (gw_liveness.h)
  static constexpr uint32_t kStageMax = 32;  // work requests per ibv_post_send
  using Sig = ep_state::Sig;
  using Lane = ep_state::Lane;
  std::vector<Lane> lanes_;  // [0]: SENDs, credits and stripe 0; [1..]: stripes only
  int cq_entries_ = 0;
  std::unique_ptr<uint8_t[]> rx_mem_, tx_mem_;
  MrPtr rx_mr_, tx_mr_, credit_mr_;
  size_t slot_bytes_ = 0;
  uint32_t tx_next_ = 0, tx_free_ = 0;  // transmit buffers: a ring, retired in order
  std::vector<ibv_recv_wr> rwrs_;       // lane 0: receive buffer i's work request
  std::vector<ibv_sge> rsges_;
  ibv_recv_wr *rfirst_ = nullptr, *rlast_ = nullptr;  // the staged reposts, chained
  uint32_t rstaged_ = 0;
  // Credits: words the peer RDMA-writes; counts that wrap at 2^32.
  using CreditWords = ep_state::CreditWords;
  std::unique_ptr<CreditWords> credit_;
  uint32_t posted_ = 0, advertised_ = 0, peer_posted_ = 0, sent_ = 0;
  uint64_t peer_credit_addr_ = 0;
  uint32_t peer_credit_rkey_ = 0;
  uint32_t consumed_ = 0;  // lane 0's receive buffers taken by the peer's messages
  int32_t credit_half_ = 1, credit_quarter_ = 1;  // recv_depth / 2 and / 4 (at least 1)
  uint32_t max_inline_ = 0, eager_limit_ = 0, psn_ = 0;
  // High 32 bits of the tags of compact eager messages (rdma_wire.h), each direction.
  uint32_t tx_tag_hi_ = 0, rx_tag_hi_ = 0;
  bool bound_ = false;  // connect() handed it to the caller (peer id known)
  std::vector<SendSlot> sends_;
  std::vector<uint32_t> free_sends_;
  std::vector<RndvRecv> rndv_;
  std::vector<uint32_t> free_rndv_;
  Ring<Held> held_;        // in arrival order; at most lane 0's receive buffers
  bool retrying_ = false;  // retry_held() is matching held_.front()
  Ring<TxItem> txq_;
  // Advertisements (rdma_recv.cc). Receiver side: eager+RTS headers matched so far and
  // advertisements outstanding. Sender side: eager+RTS messages queued so far, the recent ones
  // (an advertisement made before they arrived is theirs), the usable advertisements.
  using Orphan = ep_state::Orphan;
  using Advert = ep_state::Advert;
  uint32_t matched_ = 0, adverts_out_ = 0;
  uint32_t queued_ = 0, orphan_floor_ = 0;
  bool orphans_lost_ = false;
  Ring<Orphan> orphans_;
  Ring<Advert> adverts_;
  // Staging (rdma_staging.cc). The registration goes before the pool frees its memory.
  using StageOp = ep_state::StageOp;
  using Win = ep_state::Win;
  using Pinned = ep_state::Pinned;
  Pinned out_, in_;  // separate, so receive windows never take the buffers sends need
  Ring<StageOp> stage_out_;
  std::vector<Win> wins_;
  std::vector<uint32_t> starved_;  // staged receives waiting for a buffer, in order
  uint32_t win_seq_ = 0, copies_in_ = 0;
  bool busy_ = false;  // counted in the transport's staging_busy_
  friend class RdmaTransport;
};

// On every message's path: inline.
inline int32_t RdmaEndpoint::credits() const {
  uint32_t pp = peer_posted_, w = credit_->peer_posted;
  if (static_cast<int32_t>(w - pp) > 0) pp = w;
  return static_cast<int32_t>(pp - sent_);
}

// Every request reserved its completion when it was accepted (rdma.cq_depth).
inline void RdmaEndpoint::complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code) {
  core_.complete(wr_id, tag, len, op, code);
}

inline void RdmaEndpoint::under_way(uint64_t tag) {
  if (orphans_.full()) {
    orphan_floor_ = orphans_.front().index + 1;
    orphans_lost_ = true;
    orphans_.pop();
  }
  orphans_.push(Orphan{queued_++, tag, false});
}

}  // namespace gw::drv::rdma
