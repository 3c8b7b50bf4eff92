/// @file dpdk_endpoint.h
/// One connection over the transport's port. Send side: posted sends are cut into packets of
/// at most one MTU (small messages queued together share one packet, a batch), numbered, kept
/// in a window until acknowledged (cumulative ack plus a selective-ack bitmap of the receive
/// buffer), retransmitted on timeout (RTO from measured RTT, doubled per consecutive timeout)
/// or early when three later packets were acknowledged (fast retransmit); a send completes once
/// all its packets are acknowledged. Receive side: a packet of an already matched message is
/// copied into the posted buffer at once, whatever its order, and so is the next message to
/// match once its first packet is in; others (and batches) are held (bounded) until every
/// earlier packet is in, so messages are matched to receives in send order; the cumulative ack
/// only moves past consumed packets, which is the flow control. A silent peer with requests
/// pending fails the endpoint (RemoteError).
/// Thread-safety: none; owned by the caller, driven by its DpdkTransport.
#pragma once

#include <memory>
#include <vector>

#include "dpdk_endpoint_state.h"
#include "dpdk_transport.h"

namespace gw::drv::dpdk {

class DpdkEndpoint final : public Endpoint, private core::RecvHooks {
 public:
  DpdkEndpoint(DpdkTransport* t, const ConnectParams& p, uint32_t conn, const PeerAddr& peer,
               const std::string& remote);
  ~DpdkEndpoint() override;

  Result<size_t> post_send(std::span<const SendRequest> reqs) override;
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override;
  Status status() const override { return core_.error(); }

  // --- set-up (dpdk_transport.cc) ---
  void start_active(uint64_t key, Deadline deadline);
  /// Answers the parked SYN's authentication; a refusal fails the endpoint.
  void start_passive(uint64_t key, const ParkedSyn& syn);
  /// Passive side: progress until the dialler's proof passed; only then is the endpoint
  /// found by incoming packets, so nothing is delivered before. @return the refusal, Timeout.
  Status await_proof(Deadline deadline);
  /// The dialler's proof (kSynProof bytes), from a SYN.
  void on_proof(const uint8_t* p);

  // --- data path (dpdk_send.cc, dpdk_recv.cc, dpdk_progress.cc) ---
  void on_data(const WireHdr& h, rte_mbuf* m, uint32_t payload_off);
  /// `ext`: the ack's `ext_words` selective-ack words after the header's.
  void on_ack(const WireHdr& h, const uint64_t* ext = nullptr, uint32_t ext_words = 0);
  /// `p`: the SYN-ACK's h.seg_len bytes of authentication.
  void on_synack(const WireHdr& h, const uint8_t* p);
  void on_fin(const WireHdr& h);
  /// When the peer's last data packet arrived (the incast budget counts the peers sending).
  uint64_t last_data() const { return last_data_; }
  void pump();
  void timers(uint64_t now);
  void send_ack();
  /// On link `link`; -1: the one the peer's data last came in on, if this side takes it.
  void send_control(PktType type, int link = -1);
  // --- several links (dpdk_links.cc) ---
  /// A probe on `link`: answered on it, or its answer (the link carries again).
  void on_probe(const WireHdr& h, uint8_t link);
  /// A probe (or, `answer`, its answer) on `link`.
  void send_probe(uint8_t link, bool answer);
  /// Takes out a link that owes acks too long, sending its packets again; probes dead ones.
  void check_links(uint64_t now);
  /// A packet of the peer's came in on `link` (control frames go back on it).
  void rx_on(uint8_t link) { rx_link_ = link; }
  // --- device-memory staging (dpdk_staging.cc) ---
  /// The staged window of device send `s` at seg_off_ (staging more ahead while slots are
  /// free): its bytes and how many of them are left. False: not staged yet (pump later).
  bool tx_staged(const SendRequest& r, const uint8_t** data, uint64_t* room);
  /// A packet that ends a staged window was sent as `seq`.
  void tx_window_sent(uint32_t seq);
  /// Release the windows whose packets the peer acknowledged.
  void release_tx_windows();
  /// Copy a packet's payload of device message mi through a receive slot.
  void copy_in_dev(int mi, const WireHdr& h, const rte_mbuf* m, uint32_t off);
  /// A host-to-device copy of message m finished.
  void rx_copy_done(int m);
  bool rx_dev(int mi) const { return !rx_dev_.empty() && rx_dev_[static_cast<size_t>(mi)].dev; }
  bool need_ack() const { return need_ack_; }
  bool stalled() const { return stalled_; }
  /// Sent data awaits its ack and the last transmission was recent.
  bool awaiting_ack(uint64_t now) const {
    return snd_una_ != snd_nxt_ && now - last_tx_ < 2'000'000;
  }
  void advance();
  bool failed() const { return core_.failed(); }
  /// Fails every pending request with st's code. `quiet_close`: the peer closed in order;
  /// logged at debug level when nothing was pending, and the messages that arrived whole and
  /// wait for their receive stay receivable.
  void fail(const Status& st, bool quiet_close = false);
  /// Transport::abort: a FIN to the peer (so it fails now, not at its retransmit limit), then
  /// fail(st).
  void abort(const Status& st);
  /// Accepts a packet from the peer's address and connection id.
  bool from_peer(uint32_t ip, uint16_t port, uint32_t src_conn) const {
    return ip == peer_.ip && port == peer_.port && (!connected_ || src_conn == remote_conn_);
  }

  const PeerAddr& peer() const { return peer_; }
  uint32_t conn() const { return conn_; }
  uint32_t remote_conn() const { return remote_conn_; }
  uint64_t key() const { return key_; }
  uint32_t rcv_nxt() const { return rcv_nxt_; }        ///< for tests that craft frames
  uint32_t next_match() const { return next_match_; }  ///< for tests that craft frames
  bool active() const { return active_; }
  uint64_t last_rx_ = 0, last_data_ = 0;
  uint8_t hdr_template_[kEthLen + kIpLen + kUdpLen] = {};

 private:
  friend class DpdkTransport;
  using SendSlot = ep_state::SendSlot;
  using TxWin = ep_state::TxWin;
  using RxDev = ep_state::RxDev;
  using TxPkt = ep_state::TxPkt;
  using RxSlot = ep_state::RxSlot;
  bool transmit(uint32_t seq);
  bool append_batch(const TxPkt& p, rte_mbuf* m);
  bool attach_payload(const TxPkt& p, rte_mbuf* m);
  /// The link for (re)sending packet p, its accounting moved there.
  uint8_t route(ep_state::TxPkt& p);
  void acked_on_link(ep_state::TxPkt& p) {
    if (p.on_link) links_.left(p.link, true, t_->now());
    p.on_link = false;
  }
  uint32_t fill_ack(WireHdr* h, uint64_t* ext);
  uint64_t held_bits(uint32_t seq) const;
  void complete_sends();
  void retransmit_timed_out(uint64_t now);
  void on_loss(uint32_t seq);
  void fast_retransmit(uint32_t highest);
  void grow_window(uint32_t acked);
  int lookup_msg(uint32_t msg_id) const;
  int match_new(const WireHdr& h);
  void place(int mi, const WireHdr& h, rte_mbuf* m, uint32_t off);
  void copy_in(int mi, const WireHdr& h, const rte_mbuf* m, uint32_t off);
  bool consume_batch(RxSlot& s);
  bool take_data(RxSlot& s);
  int pump_batch();
  void finish_msg(int m);
  bool copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) override;
  Status ensure_tx_pool();
  void mark_rx_dev(int m);
  void drop_staging();
  void rtt_sample(uint64_t rtt);

  DpdkTransport* t_;
  PeerAddr peer_;
  std::string remote_;
  core::EndpointCore core_;
  uint32_t conn_ = 0, remote_conn_ = 0;
  uint64_t key_ = 0;
  bool active_ = false, connected_ = false, need_ack_ = false, stalled_ = false;
  uint64_t connect_deadline_ = 0, last_tx_ = 0, next_syn_ = 0, syn_interval_ = 0;
  ep_state::Auth auth_;  // set-up only
  void set_auth_out(const uint8_t* p, size_t n);
  void connected(uint32_t wnd);
  // Send side.
  Ring<SendSlot> sends_;
  size_t seg_idx_ = 0;  // index in sends_ of the send being cut into packets
  uint64_t seg_off_ = 0;
  uint32_t snd_una_ = 0, snd_nxt_ = 0, msg_tx_ = 0;
  uint32_t msg_una_ = 0;  // message number of sends_.front()
  // win_: packets in flight not yet held by the peer (sent, neither acknowledged nor
  // selectively acknowledged). rwin_ = kRecvWindows * win_: the receive buffer, and how far
  // past the oldest unacknowledged packet the sender may go. A loss stops the cumulative ack
  // while the retransmission queues behind a window of packets at the receiver; with a buffer
  // of only win_ the sender then stalls and the receiver idles once per loss.
  static constexpr uint32_t kRecvWindows = 2;
  uint32_t win_ = 0, rwin_ = 0, mask_ = 0;
  uint32_t sacked_ = 0;       // packets in [snd_una_, snd_nxt_) selectively acknowledged
  uint32_t high_sacked_ = 0;  // the highest packet selectively acknowledged so far
  std::vector<TxPkt> inflight_;
  EpLinks links_;
  uint8_t rx_link_ = 0;
  uint64_t srtt_ = 0, rttvar_ = 0, rto_ = 0;
  int backoff_ = 0;
  uint64_t last_advance_ = 0;  // when snd_una_ last moved (restarts the retransmission timer)
  uint32_t cwnd_ = ~0u, cwnd_acc_ = 0, recover_ = 0;  // window after losses (see on_loss)
  uint32_t grant_ = ~0u;  // the peer's (receiver's) share of its incast budget for us
  // Receive side.
  std::vector<RxSlot> rx_;
  std::vector<uint64_t> rx_bits_;  // bit seq & mask_: rx_[seq & mask_].present (for the sack)
  uint32_t rcv_nxt_ = 0, next_match_ = 0;
  uint32_t rx_high_ = 0;      // one past the highest packet number accepted
  std::vector<int> msg_map_;  // msg_id & mask_ -> InMsg of a matched, incomplete message
  // Device-memory staging: made on the first device request.
  std::unique_ptr<StagingPool> tx_pool_;
  Ring<TxWin> tx_wins_;
  uint64_t stage_next_ = 0;  // next offset of the send being segmented to stage
  std::vector<RxDev> rx_dev_;
};

}  // namespace gw::drv::dpdk
