/// @file tcp_endpoint.h
/// One peer over several TCP streams. Send side: each message gets a sequence number and is
/// cut into chunks queued on streams. Receive side: the first chunk of message `next_match_`
/// is matched by the transport core (gw_core.h), which may buffer it as unexpected; chunks of
/// later messages wait (their stream is not read) until then.
/// Thread-safety: none; owned by the caller, driven by its TcpTransport.
#pragma once

#include <memory>
#include <vector>

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

  std::vector<std::unique_ptr<Stream>> streams_;

 private:
  friend class TcpTransport;
  struct SendSlot {
    SendRequest req;
    uint32_t chunks_left = 0;
    bool used = false;
  };
  /// What tcp adds to the core's message (same slot numbers).
  struct MsgExt {
    bool device = false;  // the receive buffer is device memory (staged)
    uint32_t copies = 0;  // host-to-device copies still in flight
    uint64_t received = 0;
  };
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
  bool read_some(Stream& s, uint8_t* dst, size_t n, size_t* got);
  Status stream_error(const Stream& s, const char* what, int err) const;
  /// One stream's socket into the transport's epoll set, or out of it.
  Status set_watched(Stream& s, bool on);

  TcpTransport* t_;
  std::string remote_;
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
