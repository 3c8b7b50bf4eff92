/// @file tcp_endpoint.h
/// One peer over several TCP streams. Send side: each message gets a sequence number and is
/// cut into chunks queued on streams. Receive side: the first chunk of message `next_match_`
/// is matched by the transport core (gw_core.h), which may buffer it as unexpected; chunks of
/// later messages wait (their stream is not read) until then.
/// Thread-safety: none; owned by the caller, driven by its TcpTransport.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <memory>
#include <set>
#include <vector>

#include "gw_auth.h"
#include "tcp_endpoint_state.h"
#include "tcp_transport.h"

namespace gw::drv::tcp {

class TcpEndpoint final : public Endpoint, private core::RecvHooks {
 public:
  TcpEndpoint(TcpTransport* t, const ConnectParams& p, std::string remote);
  ~TcpEndpoint() override;

  Result<size_t> post_send(std::span<const SendRequest> reqs) override;
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override;
  Status status() const override { return core_.error(); }

  /// Take ownership of connected sockets (and their TLS sessions, when tcp.tls=on: one per
  /// fd, handshake done) and join the transport's epoll set.
  Status attach(std::vector<Fd> fds, std::vector<SslPtr> ssls);

  /// Add the streams to the transport's epoll set, or take them out. A stream that cannot
  /// be added fails the endpoint.
  void watch(bool on);

  // --- data path (tcp_send.cc, tcp_recv.cc) ---
  void flush(Stream& s);
  void read(Stream& s);
  bool failed() const { return core_.failed(); }
  /// Fails every pending request and the endpoint. `keep_buffered`: the peer closed
  /// cleanly, so messages it sent that wait complete for their receive stay receivable.
  void fail(const Status& st, bool keep_buffered = false);

  // --- device-memory staging (tcp_staging.cc) ---
  /// Start device-to-host copies of queued device chunks (bounded per stream), and hand the
  /// finished ones their pinned payload.
  void stage_tx(Stream& s);
  /// Read payload of a device-memory message through a receive slot. False: stop reading
  /// this stream for now (no data, no slot, or failed).
  bool read_staged(Stream& s, size_t have, int* reads);
  /// A host-to-device copy of message m finished.
  void rx_copy_done(int m);
  bool has_tx_pool() const { return tx_pool_ != nullptr; }

  // --- liveness (tcp_liveness.cc) ---
  /// Every ~10 ms of progress: heartbeats out while `live` (this transport's progress thread
  /// runs) and once when that changes; fails the endpoint when a live peer has sent nothing
  /// for tcp.peer_timeout_ms while requests wait on it.
  void liveness(uint64_t now, bool live);

  // --- several links (tcp.ifaces; tcp_links.cc) ---
  /// Links mode: `n` links, the peer's addresses (either side may join streams to them).
  void set_links(uint32_t n, std::vector<SockAddr> remotes, bool active);
  bool links() const { return nlinks_ > 1; }
  uint64_t key() const { return key_; }
  /// Each progress pass: waiting chunks go to streams with room.
  void links_poll();
  /// After reading `s`: tell the peer how far (its chunks complete then).
  void send_ack(Stream& s, bool now = false);
  void on_ack(const FrameHeader& h);
  /// A chunk sent again (kResent): whether to take it (not read on its first stream). The
  /// first one from a stream ends our reading of it.
  bool take_resent(const FrameHeader& h);
  /// Every ~10 ms: a link silent for tcp.link_timeout_ms is given up; streams are joined where
  /// one is needed, and (dialling side) to links without one, each second.
  void links_check(uint64_t now);
  /// A stream of ours is unusable (`why`): what it holds goes to the others.
  void lose(Stream& s, const std::string& why);
  /// The peer closed `s` (`between`: between frames) or it broke: we read it no more; when
  /// every stream is closed, the peer left.
  void links_eof(Stream& s, bool between);
  /// An error a link gives (timed out, unreachable) rather than the peer's process (reset).
  static bool link_error(int err) {
    return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == ENETDOWN;
  }
  /// A stream the peer joined (kHelloJoin). @return false: not yet.
  Result<bool> join_accepted(Fd& fd, const FrameHeader& hello);

  std::vector<std::unique_ptr<Stream>> streams_;

 private:
  friend class TcpTransport;
  using SendSlot = ep_state::SendSlot;
  using MsgExt = ep_state::MsgExt;
  using Joining = ep_state::Joining;
  static constexpr int kEagerSlots = 64;  // links mode: lk_.eager's slots
  static constexpr int kMaxInMsgs = 128;
  static constexpr size_t kStageSize = 32 * 1024;
  static constexpr size_t kTlsPack = 16 * 1024;   // one TLS record of small parts
  static constexpr uint64_t kLatencyMax = 16384;  // smaller messages stay on stream 0
  static constexpr int kMaxReadsPerPoll = 32;     // one busy stream must not starve others

  bool copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) override;
  int chunks_for(uint64_t len) const;
  Status ensure_tx_pool();
  void release_tx_slot(Stream& s, Chunk& c);
  void commit_rx_slot(Stream& s);
  bool start_chunk(Stream& s);
  int match_new(const FrameHeader& h);
  void end_chunk(Stream& s);
  /// The chunk being read is dropped (the stream was cut): its payload is skipped.
  void discard_chunk(Stream& s);
  bool read_some(Stream& s, uint8_t* dst, size_t n, size_t* got);
  // flush()'s steps (tcp_send.cc).
  bool send_tls(Stream& s, const iovec* iov, int niov, ssize_t* w);
  void send_failed(Stream& s);
  void sent_bytes(Stream& s, size_t w, size_t asked);
  // read()'s steps (tcp_recv.cc). @return false: stop reading the stream for now.
  bool take_header(Stream& s);
  bool read_header(Stream& s, size_t have, int* reads);
  bool read_payload(Stream& s, size_t have, int* reads);
  Status stream_error(const Stream& s, const char* what, int err) const;
  /// One stream's socket into the transport's epoll set, or out of it.
  Status set_watched(Stream& s, bool on);

  Status add_stream(Fd fd, std::vector<SslPtr>* ssls, size_t i, uint32_t link);
  /// Pops txq's head (written; acknowledged in links mode): its send may complete.
  void chunk_done(Stream& s);
  Status post_links(const SendRequest& r, bool dev);
  void feed();
  bool next_chunk(Chunk* c);
  void push_frame(Stream& s, Chunk c);
  void rejoin(uint64_t now);
  void inject_fault();
  /// Chunks to send again that no stream may carry: a fresh stream is joined.
  void need_stream();
  void reap(Stream& s);
  /// We send no more on `s`; `tell`: advise the peer to do the same (kGiveUp); `warn`: log
  /// it as a warning (else debug: the peer's orderly close).
  void retire(Stream& s, const std::string& why, bool tell = true, bool warn = true);
  void requeue(Stream& s);
  /// A joined stream the peer has sent nothing on yet: its dialler may have given up on it
  /// (the handshake timed out on its side), so its errors are not the peer's.
  static bool fresh(const Stream& s) { return s.id >= kJoinIds && s.rx_bytes == 0; }
  static constexpr uint32_t kJoinIds = 1u << 16;           // ids of joined streams start here
  static constexpr uint64_t kJoinEveryNs = 1'000'000'000;  // links retried; a join's limit
  /// We read no more of `s` (the peer gave it up).
  void close_rx(Stream& s);
  void down(Stream& s);
  void start_join(uint32_t link, uint64_t now);
  bool step_join(Joining& j, uint64_t now);
  static bool window_shut(const Stream& s);
  void poll_probe(uint64_t now);
  Stream* by_id(uint32_t id);

  TcpTransport* t_;
  std::string remote_;
  uint64_t key_ = 0;
  uint32_t nlinks_ = 1;
  bool active_ = false;  // we dialled: we join streams
  ep_state::Links lk_;   // links mode (tcp_links.cc, tcp_join.cc)
  core::EndpointCore core_;
  std::vector<SendSlot> sends_;
  std::vector<int> free_sends_;
  std::vector<MsgExt> ext_;
  // Heartbeats (gw_liveness.h): bytes arrived since the last check are a plain store per read.
  core::PeerLiveness live_;
  uint64_t tx_seq_ = 0;
  uint64_t next_match_ = 0;
  size_t rr_ = 0;
  std::unique_ptr<StagingPool> tx_pool_;  // made on the first device-memory send
};

}  // namespace gw::drv::tcp
