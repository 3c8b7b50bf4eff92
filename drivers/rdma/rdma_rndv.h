/// @file rdma_rndv.h
/// Rendezvous: messages above rdma.eager_bytes (and all GPUDirect memory). The sender SENDs a
/// request (RTS); the receiver matches it, takes a rendezvous slot and answers CTS with its
/// buffer's address and rkey; the sender RDMA-WRITEs, striped over the connection's lanes
/// (rdma.qps_per_conn), each stripe's last chunk with immediate (the receiver's slot), and the
/// receive completes with the last stripe. Advertised receives (rdma_adverts.h), pulls
/// (rdma_pulls.h) and staged receives (rdma_staging.h) land through the same slots.
/// Thread-safety: none; a part of its RdmaEndpoint.
#pragma once

#include <cstdint>
#include <vector>

#include "rdma_endpoint_state.h"

namespace gw::drv::rdma {

class RdmaEndpoint;

class Rendezvous {
 public:
  using RndvRecv = ep_state::RndvRecv;
  using TxItem = ep_state::TxItem;

  explicit Rendezvous(RdmaEndpoint& ep) : ep_(ep) {}
  void init(uint32_t slots);

  // --- receive slots ---
  RndvRecv& slot(uint32_t s) { return slots_[s]; }
  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }
  bool full() const { return free_.empty(); }
  bool idle() const { return free_.size() == slots_.size(); }
  /// A free slot, cleared (the caller checked !full()).
  uint32_t take() {
    const uint32_t s = free_.back();
    free_.pop_back();
    slots_[s] = RndvRecv{};
    return s;
  }
  /// take() for receive `r` (`tag`, `len` bytes), marked used.
  uint32_t take(const RecvRequest& r, uint64_t tag, uint64_t len) {
    const uint32_t s = take();
    RndvRecv& rv = slots_[s];
    rv.req = r;
    rv.tag = tag;
    rv.len = len;
    rv.used = true;
    return s;
  }
  void put(uint32_t s) {
    slots_[s] = RndvRecv{};
    free_.push_back(s);
  }
  /// Stripes (lanes) a rendezvous of `len` bytes is spread over.
  uint8_t stripes_for(uint64_t len) const;

  // --- receiver ---
  /// Answers RTS `send_id` for host (or GPUDirect) receive `r`: CTS to its buffer.
  void clear_to_send(const RecvRequest& r, uint64_t tag, uint64_t len, uint32_t send_id);
  /// Tells the sender its request was delivered to a receive too small for it.
  void reject(uint32_t send_id);
  /// A stripe landed (WRITE with immediate on any lane). @return false on error.
  bool on_write_imm(uint32_t imm);

  // --- sender ---
  /// Queues the RDMA WRITEs of send slot `s` into the peer's receive slot `rslot` at
  /// addr/rkey, striped over `stripes` lanes. The caller checks txq_ room.
  /// A window (kWin) asks for `len` bytes from offset `base` only.
  void queue_write(uint32_t s, uint32_t rslot, uint64_t addr, uint32_t rkey, uint8_t stripes,
                   uint64_t base = 0, uint64_t len = UINT64_MAX);
  /// Stages the queued write's chunks. @return true once every chunk is staged.
  bool post_write(TxItem& it);
  /// A WRITE with immediate of send slot `s` completed.
  void stripe_written(uint32_t s);

 private:
  RdmaEndpoint& ep_;
  std::vector<RndvRecv> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace gw::drv::rdma
