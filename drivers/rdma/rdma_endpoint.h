/// @file rdma_endpoint.h
/// One peer over RC queue pairs (rdma_lanes.h). Messages up to rdma.eager_bytes are SENT into
/// the peer's pre-posted receive buffers, a credit each (rdma_credits.h), from a transmit
/// buffer or registered memory; larger ones by rendezvous (rdma_rndv.h), into advertised
/// receives (rdma_adverts.h), pulled (rdma_pulls.h) or staged (rdma_staging.h): parts the
/// endpoint owns. Outgoing work goes through one ordered software queue, so a lack of credits
/// or send queue room only delays it (an eager send with nothing queued ahead skips it).
/// Thread-safety: none; owned by the caller, driven by its RdmaTransport.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "rdma_adverts.h"
#include "rdma_buffers.h"
#include "rdma_credits.h"
#include "rdma_lanes.h"
#include "rdma_pulls.h"
#include "rdma_rndv.h"
#include "rdma_staging.h"
#include "rdma_transport.h"

namespace gw::drv::rdma {

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
  void read_ctrl();  // what the control connection brought: heartbeats, or EOF
  /// Every ~10 ms: a heartbeat out while `live` (a progress thread runs); the peer's silence.
  void liveness(uint64_t now, bool live);
  uint32_t id() const { return id_; }
  uint32_t qpn() const { return lanes_.empty() ? 0 : lanes_.qp(0)->qp_num; }
  /// Queue pair of `lane` (null past the last): for tests that speak raw verbs to a peer.
  ibv_qp* qp(size_t lane) const { return lane < lanes_.size() ? lanes_.qp(lane) : nullptr; }
  size_t lanes() const { return lanes_.size(); }
  int cq_entries() const { return cq_entries_; }  // CQ entries it may occupy (create())

  // --- data path (rdma_progress.cc) ---
  void on_wc(const ibv_wc& wc, WrKind kind, uint32_t idx);
  void flush();
  /// Work for flush(). Reposts and credits wait for an idle poll (idle_work()), off the way to
  /// the caller's next completion, unless the peer may be down to a quarter of its credits.
  bool has_tx() const {
    return !txq_.empty() || (credits_.below_quarter() && (rx_.staged() > 0 || credit_due())) ||
           staging_.pending() || !held_.empty();
  }
  bool idle_work() const { return rx_.staged() > 0; }
  /// Fails every pending request and the endpoint. `orderly`: the peer left cleanly: messages
  /// that arrived whole stay receivable; the failure warns only if it lost work.
  void fail(const Status& st, bool orderly = false);
  /// Messages wait in their receive buffers (back-pressure); retry_held() matches them.
  bool held() const { return !held_.empty(); }
  void retry_held();
  bool failed() const { return core_.failed(); }
  /// A post took a buffered message since the last call (flush: its answer goes out now).
  bool take_took() { return std::exchange(took_, false); }

 private:
  friend class RdmaTransport;
  friend class Adverts;
  friend class Lanes;
  friend class Pulls;
  friend class Rendezvous;
  friend class Staging;
  using SendSlot = ep_state::SendSlot;
  using TxItem = ep_state::TxItem;

  // --- receiving (rdma_progress.cc, rdma_recv.cc) ---
  void on_recv(const ibv_wc& wc, uint32_t slot);
  void on_lane_recv(const ibv_wc& wc, uint32_t lane);
  // These @return false when the message stays in its receive buffer (held_).
  bool on_header_msg(const ibv_wc& wc, const uint8_t* buf, uint32_t slot);
  bool on_message(const MsgHdr& h, const uint8_t* payload);
  bool deliver_eager(uint64_t tag, const uint8_t* payload, uint32_t len);  // compact eager
  /// An eager or RTS message the core matched (core message m): deliver it, or buffer it.
  void arrived(int m, MsgType type, const uint8_t* payload, uint32_t send_id);
  void deliver(const RecvRequest& r, MsgType type, uint64_t tag, uint64_t len,
               const uint8_t* payload, uint32_t send_id);
  void hold(const MsgHdr& h, uint32_t slot, uint32_t off);
  bool held_tag(uint64_t tag);  // a held message has this tag (kAnyTag: any)
  // core::RecvHooks: a buffered message into its receive, a buffered RTS claimed.
  bool copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) override;
  void claimed(int m) override { pulls_.claimed(m); }
  void complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code) {
    core_.complete(wr_id, tag, len, op, code);  // reserved when accepted (rdma.cq_depth)
  }
  void finish_send(uint32_t s, Code code);

  // --- sending and posting (rdma_send.cc, rdma_endpoint.cc) ---
  bool queue_send(const SendRequest& r, Status* st);
  bool send_now(const SendRequest& r);
  void stage_compact(uint32_t s, uint32_t lkey);
  bool post_msg(const TxItem& it);
  size_t fill_msg(const TxItem& it, bool compact, uint8_t* buf);
  void post_credit();
  bool credit_due() const { return credits_.due() && !failed(); }
  bool credit_urgent() const { return credits_.below_quarter() && credit_due(); }  // due now
  void post_recvs();
  void repost_lane(uint32_t lane);
  Status create_lane(uint32_t i, uint32_t recv_depth);
  Status protocol_error(const std::string& what);
  [[gnu::cold, gnu::noinline]] void fail_verbs(const char* call, uint32_t lane, int rc);
  [[gnu::cold, gnu::noinline]] void recv_failed(const ibv_wc& wc);
  [[gnu::cold, gnu::noinline]] void compact_too_long(uint32_t len);
  Status wc_error(const ibv_wc& wc, const char* what) const;
  Counters& counters() { return t_->counters_; }

  RdmaTransport* t_;
  uint32_t id_;
  core::EndpointCore core_;  // posted receives, buffered messages, completions, the error
  bool took_ = false;
  Fd ctrl_;
  CtrlItem ctrl_item_;
  core::PeerLiveness live_;  // heartbeats on ctrl_ (gw_liveness.h)
  Lanes lanes_{*this};
  int cq_entries_ = 0;
  RecvBuffers rx_;  // lane 0's
  TxRing tx_;
  Credits credits_;
  uint32_t max_inline_ = 0, eager_limit_ = 0, psn_ = 0;
  uint32_t tx_tag_hi_ = 0, rx_tag_hi_ = 0;  // compact eager tags' high 32 bits (rdma_wire.h)
  bool bound_ = false;                      // connect() handed it to the caller (peer id known)
  std::vector<SendSlot> sends_;
  std::vector<uint32_t> free_sends_;
  Ring<ep_state::Held> held_;  // in arrival order; at most lane 0's receive buffers
  bool retrying_ = false;      // retry_held() is matching held_.front()
  Ring<TxItem> txq_;
  Rendezvous rndv_{*this};
  Adverts adverts_{*this};
  Pulls pulls_{*this};
  Staging staging_{*this};  // last: its pinned buffers outlive nothing that copies into them
};

}  // namespace gw::drv::rdma
