/// @file tcp_endpoint.h
/// One peer over several TCP streams. Send side: each message gets a sequence number and is
/// cut into chunks queued on streams. Receive side: the first chunk of message `next_match_`
/// matches it to the earliest posted receive with its tag (endpoint or any-source), or buffers
/// it as unexpected; chunks of later messages wait (their stream is not read) until then.
/// Thread-safety: none; owned by the caller, driven by its TcpTransport.
#pragma once

#include <memory>
#include <vector>

#include "tcp_transport.h"

namespace gw::drv::tcp {

class TcpEndpoint final : public Endpoint {
 public:
  TcpEndpoint(TcpTransport* t, const ConnectParams& p, std::string remote);
  ~TcpEndpoint() override;

  Result<size_t> post_send(std::span<const SendRequest> reqs) override;
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override;
  Status status() const override { return error_; }

  /// Take ownership of connected sockets and join the transport's epoll set.
  Status attach(std::vector<Fd> fds);

  // --- data path (tcp_datapath.cc) ---
  void flush(Stream& s);
  void read(Stream& s);
  bool failed() const { return !error_.ok(); }
  /// Fails every pending request and the endpoint. `keep_buffered`: the peer closed
  /// cleanly, so messages it sent that wait complete for their receive stay receivable.
  void fail(const Status& st, bool keep_buffered = false);
  /// Earliest unexpected, not yet claimed message with a matching tag; -1 if none.
  int find_unexpected(uint64_t tag) const;
  uint64_t arrival_of(int m) const { return msgs_[m].arrival; }
  void bind_unexpected(int m, const RecvRequest& r);

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

  std::vector<std::unique_ptr<Stream>> streams_;

 private:
  friend class TcpTransport;
  struct SendSlot {
    SendRequest req;
    uint32_t chunks_left = 0;
    bool used = false;
  };
  struct PostedRecv {
    RecvRequest req;
    uint64_t post_seq = 0;
  };
  enum class Dest : uint8_t { kUser, kUnexpected, kDrain };
  /// A message being received (or buffered, complete, until someone posts its receive).
  struct InMsg {
    bool active = false;
    bool complete = false;
    bool device = false;      // the receive buffer is device memory (staged)
    uint32_t copies = 0;      // host-to-device copies still in flight
    bool claimed = false;     // an unexpected message a receive has taken
    bool claim_err = false;   // ... whose buffer was too small (error already reported)
    Dest dest = Dest::kUser;
    uint64_t seq = 0, tag = 0, len = 0, received = 0, arrival = 0;
    uint8_t* base = nullptr;
    BufferCache::Buf ubuf;
    RecvRequest req;
  };
  static constexpr int kMaxInMsgs = 128;
  static constexpr size_t kStageSize = 32 * 1024;

  Status check_send(const SendRequest& r) const;
  Status check_recv(const RecvRequest& r) const;
  int chunks_for(uint64_t len) const;
  Status ensure_tx_pool();
  void release_tx_slot(Stream& s, Chunk& c);
  void commit_rx_slot(Stream& s);
  bool start_chunk(Stream& s);
  int match_new(const FrameHeader& h);
  void end_chunk(Stream& s);
  void finish_msg(int m);
  void deliver_unexpected(int m);
  void release_msg(int m);
  bool read_some(Stream& s, uint8_t* dst, size_t n, size_t* got);
  void complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code);
  Status stream_error(const Stream& s, const char* what, int err) const;

  TcpTransport* t_;
  std::string remote_;
  Status error_;
  std::vector<SendSlot> sends_;
  std::vector<int> free_sends_;
  SlotList<PostedRecv> recvs_;
  std::vector<InMsg> msgs_;
  uint64_t tx_seq_ = 0;
  uint64_t next_match_ = 0;
  size_t rr_ = 0;
  size_t outstanding_ = 0;  // completions reserved by this endpoint, not yet pushed
  std::unique_ptr<StagingPool> tx_pool_;  // made on the first device-memory send
};

}  // namespace gw::drv::tcp
