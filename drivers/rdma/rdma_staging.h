/// @file rdma_staging.h
/// Staging windows: CUDA memory without GPUDirect (rdma.gpu = staging). Nothing registers
/// device memory; each endpoint has pinned buffers (gw::StagingPool, one pool per direction),
/// made and registered on first use. Send: each buffer is filled by a device-to-host copy,
/// then RDMA-written (the stripe's last buffer with immediate), so copies run ahead of the
/// wire. Receive: the receiver asks for the message window by window (kWin, one per free
/// buffer) and copies each window to the device as it lands, asking for the next when the
/// copy has finished. Small messages copy synchronously (eager).
/// Thread-safety: none; a part of its RdmaEndpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "rdma_endpoint_state.h"

namespace gw::drv::rdma {

class RdmaEndpoint;

class Staging {
 public:
  using TxItem = ep_state::TxItem;

  explicit Staging(RdmaEndpoint& ep) : ep_(ep) {}
  /// The pinned buffers, made and registered on first use (logged).
  Status ensure_pool();
  /// Made: CUDA memory went this way.
  bool active() const { return in_.pool != nullptr; }
  /// Copies in flight or receives waiting for a buffer (flush() polls them).
  bool pending() const { return copies_in_ > 0 || !starved_.empty(); }

  /// post_write for a staged send: copies out ahead, writes each buffer once copied.
  bool post_write(TxItem& it);
  void on_wc(const ibv_wc& wc, uint32_t idx);
  /// Receiver: rendezvous into CUDA memory; asks for windows into free buffers.
  void start_recv(const RecvRequest& r, uint64_t tag, uint64_t len, uint32_t send_id);
  /// The oldest window of staged receive `r` landed: copy it in. @return false on error.
  bool window_landed(uint32_t r);
  /// Finishes copies that completed; feeds starved receives.
  void poll();
  /// Eager payload into CUDA memory (a synchronous copy). @return the copy's status.
  Status copy_to_device(void* dst, const uint8_t* payload, size_t len);
  /// A small staged send into transmit buffer `dst` (a synchronous copy).
  Status copy_out(uint8_t* dst, const void* src, size_t len) {
    return out_.pool->copy_out_sync(dst, src, len);
  }
  void update_busy();
  /// The endpoint failed: no copy may touch the caller's memory any more.
  void reset();
  /// The endpoint goes: copies may still read or write pinned buffers freed after.
  void close();

 private:
  struct StageOp {  // send side: a buffer being filled from device memory, then written
    int buf = 0;
    uint32_t lane = 0, len = 0;
    uint64_t off = 0;
    bool last = false;
  };
  struct Win {  // receive side, per buffer: a window asked for, landed, copying in
    uint32_t rndv = ep_state::kNoSlot, len = 0, seq = 0;
    uint64_t off = 0;
    bool copying = false;
  };
  struct Pinned {  // the registration goes first, before the pool frees its memory
    std::unique_ptr<StagingPool> pool;
    MrPtr mr;
  };
  /// @return true while receive `r` has bytes that got no window (out of buffers).
  bool request_windows(uint32_t r);
  /// The writes of the buffers whose copies finished, in order. @return false on error.
  bool write_copied(TxItem& it);

  RdmaEndpoint& ep_;
  Pinned out_, in_;  // separate, so receive windows never take the buffers sends need
  Ring<StageOp> stage_out_;
  std::vector<Win> wins_;
  std::vector<uint32_t> starved_;  // staged receives waiting for a buffer, in order
  uint32_t win_seq_ = 0, copies_in_ = 0;
  bool busy_ = false;  // counted in the transport's staging_busy_
};

}  // namespace gw::drv::rdma
