/// @file rdma_endpoint.h
/// One peer over one RC queue pair. Messages up to rdma.eager_bytes go eagerly: header and
/// payload are copied into a registered send buffer (inline when small) and SENT into one of
/// the peer's pre-posted receive buffers. Larger ones use rendezvous: RTS, the receiver
/// matches it and answers CTS with its buffer's address and rkey, the sender RDMA-WRITEs
/// (the last chunk with immediate, which completes the receive). Every SEND and WRITE with
/// immediate uses one of the peer's receive buffers: the sender holds a credit for each;
/// receivers repost at once and return credits in every header and, when traffic is one-way,
/// by an RDMA WRITE of their posted-count into the sender's credit word (needs no credit).
/// All outgoing work goes through one ordered software queue, so a lack of credits or send
/// queue room only delays it.
/// Thread-safety: none; owned by the caller, driven by its RdmaTransport.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "rdma_transport.h"

namespace gw::drv::rdma {

/// A MemoryRegion sharing a cache entry; its death invalidates the range in the cache.
Result<MemoryRegion> make_region(RegCache& cache, void* addr, size_t len, MemKind kind);
/// The cache entry behind a region made by make_region; null for none (or length 0).
RegCache::Entry* region_entry(const MemoryRegion* mr);

class RdmaEndpoint final : public Endpoint {
 public:
  RdmaEndpoint(RdmaTransport* t, uint32_t id);
  ~RdmaEndpoint() override;

  Result<size_t> post_send(std::span<const SendRequest> reqs) override;
  Result<size_t> post_recv(std::span<const RecvRequest> reqs) override;
  Status status() const override { return error_; }

  // --- set-up (rdma_endpoint.cc) ---
  /// QP in INIT, buffers registered, receives posted. @return ResourceExhausted/SystemError.
  Status create();
  Hello local_hello(uint64_t key) const;
  /// Moves the QP to RTR and RTS toward `remote`. @return ProtocolError/SystemError.
  Status connect_qp(const Hello& remote, const std::string& who);
  void bind(const ConnectParams& p, Fd ctrl);
  int ctrl_fd() const { return ctrl_.get(); }
  uint32_t id() const { return id_; }

  // --- data path (rdma_datapath.cc) ---
  void on_wc(const ibv_wc& wc, WrKind kind, uint32_t idx);
  void flush();
  bool has_tx() const { return !txq_.empty() || credit_due(); }
  void fail(const Status& st);
  bool failed() const { return !error_.ok(); }
  /// Earliest unexpected message matching `tag`: index into unexp_, or -1.
  int find_unexpected(uint64_t tag) const;
  uint64_t arrival_of(int u) const { return unexp_[static_cast<size_t>(u)].arrival; }
  void take_unexpected(int u, const RecvRequest& r);

 private:
  struct SendSlot {
    SendRequest req;
    RegCache::Entry* reg = nullptr;  // taken from the cache for a rendezvous send
    uint64_t written = 0;            // rendezvous bytes whose WRITE is posted
    uint32_t lkey = 0;
    bool awaiting_cts = false;
    bool used = false;
  };
  struct PostedRecv {
    RecvRequest req;
    uint64_t post_seq = 0;
  };
  struct RndvRecv {
    RecvRequest req;
    uint64_t tag = 0, len = 0;
    RegCache::Entry* reg = nullptr;
    bool used = false;
  };
  struct Unexpected {
    MsgType type = MsgType::kEager;
    uint64_t tag = 0, len = 0, arrival = 0;
    uint32_t send_id = 0;
    std::unique_ptr<uint8_t[]> data;
  };
  struct TxItem {
    MsgType type = MsgType::kEager;
    bool write = false;     // rendezvous data for send slot `id`
    uint32_t id = 0, id2 = 0;
    uint64_t tag = 0, len = 0, addr = 0;
    uint32_t rkey = 0;
  };

  Status check_send(const SendRequest& r) const;
  Status check_recv(const RecvRequest& r) const;
  void on_recv(const ibv_wc& wc, uint32_t slot);
  void on_message(const MsgHdr& h, const uint8_t* payload);
  /// Deliver an arrived message to receive `r` (eager payload or rendezvous request).
  void deliver(const RecvRequest& r, MsgType type, uint64_t tag, uint64_t len,
               const uint8_t* payload, uint32_t send_id);
  void complete(uint64_t wr_id, uint64_t tag, size_t len, Op op, Code code);
  void finish_send(uint32_t s, Code code);
  bool post_msg(const TxItem& it);
  bool post_write(TxItem& it);
  void post_credit();
  bool credit_due() const;
  int32_t credits() const;
  void repost(uint32_t slot);
  Status protocol_error(const std::string& what);
  Status wc_error(const ibv_wc& wc, const char* what) const;

  RdmaTransport* t_;
  uint32_t id_;
  Status error_;
  Fd ctrl_;
  CtrlItem ctrl_item_;
  QpPtr qp_;
  std::unique_ptr<uint8_t[]> rx_mem_, tx_mem_;
  MrPtr rx_mr_, tx_mr_, credit_mr_;
  size_t slot_bytes_ = 0;
  std::vector<uint32_t> free_tx_;
  // Credits: words the peer RDMA-writes; counts that wrap at 2^32.
  struct alignas(64) CreditWords {
    volatile uint32_t peer_posted;  // written by the peer
    uint32_t my_posted;             // source of our credit WRITE
  };
  std::unique_ptr<CreditWords> credit_;
  uint32_t posted_ = 0, advertised_ = 0, peer_posted_ = 0, sent_ = 0;
  uint64_t peer_credit_addr_ = 0;
  uint32_t peer_credit_rkey_ = 0;
  uint32_t sq_used_ = 0, max_inline_ = 0, eager_limit_ = 0, psn_ = 0;
  bool bound_ = false;  // connect() handed it to the caller (peer id known)
  std::vector<SendSlot> sends_;
  std::vector<uint32_t> free_sends_;
  SlotList<PostedRecv> recvs_;
  std::vector<RndvRecv> rndv_;
  std::vector<uint32_t> free_rndv_;
  std::deque<Unexpected> unexp_;
  Ring<TxItem> txq_;
  friend class RdmaTransport;
};

}  // namespace gw::drv::rdma
