/// @file rdma_buffers.h
/// An endpoint's own registered buffers: lane 0's receive buffers (each one the peer's credit),
/// reposted in chains by one fixed work request each, and the transmit buffers eager and
/// control messages are copied into (a ring, retired in order by signalled completions).
/// Thread-safety: none; parts of their RdmaEndpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdma_device.h"

namespace gw::drv::rdma {

class RecvBuffers {
 public:
  /// `n` buffers of `slot_bytes`, registered on `pd`; buffer i's work request names endpoint
  /// `ep` (WrKind::kRecv). @return ResourceExhausted/SystemError.
  Status init(ibv_pd* pd, uint32_t n, size_t slot_bytes, uint32_t ep, const std::string& dev);
  uint8_t* at(uint32_t slot) const { return mem_.get() + size_t{slot} * slot_bytes_; }
  /// Reposts waiting for post().
  uint32_t staged() const { return staged_; }
  /// Stages buffer `slot` (consumed, so not staged already: never linked twice).
  void repost(uint32_t slot) {
    ibv_recv_wr& wr = wrs_[slot];
    wr.next = nullptr;
    (staged_ == 0 ? first_ : last_->next) = &wr;
    last_ = &wr;
    ++staged_;
  }
  /// Posts the staged reposts on `qp` (one call). @return ibv_post_recv's rc; `*n` posted.
  int post(ibv_qp* qp, uint32_t* n) {
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp, first_, &bad);
    *n = staged_;
    staged_ = 0;
    return rc;
  }

 private:
  std::unique_ptr<uint8_t[]> mem_;
  MrPtr mr_;
  size_t slot_bytes_ = 0;
  std::vector<ibv_recv_wr> wrs_;  // buffer i's work request
  std::vector<ibv_sge> sges_;
  ibv_recv_wr *first_ = nullptr, *last_ = nullptr;  // the staged reposts, chained
  uint32_t staged_ = 0;
};

class TxRing {
 public:
  /// `n` buffers of `slot_bytes`, registered on `pd`. @return ResourceExhausted/SystemError.
  Status init(ibv_pd* pd, uint32_t n, size_t slot_bytes, const std::string& dev);
  bool empty() const { return free_ == 0; }  // every buffer in flight
  uint32_t next() const { return next_; }
  uint8_t* at(uint32_t slot) const { return mem_.get() + size_t{slot} * slot_bytes_; }
  uint32_t lkey() const { return mr_->lkey; }
  /// The next buffer was staged.
  void take() {
    next_ = (next_ + 1) % n_;
    --free_;
  }
  void retired(uint32_t msgs) { free_ += msgs; }

 private:
  std::unique_ptr<uint8_t[]> mem_;
  MrPtr mr_;
  size_t slot_bytes_ = 0;
  uint32_t n_ = 0, next_ = 0, free_ = 0;
};

}  // namespace gw::drv::rdma
