// DPDK data path for CUDA device memory: the port cannot read or write it, so payload is
// staged through pinned host slots (gw::StagingPool, as drivers/tcp does).
// Send: a device message is cut into windows of one slot; each is copied device->host ahead
// of the wire (as many as slots are free), its packets go out from the slot, and the slot is
// held until the peer acknowledged every packet of it (retransmissions read it again).
// Receive: each packet of a message bound for device memory is copied into a packet-sized
// slot and from there host->device, whatever its order; the receive completes when its last
// copy has. Host memory never takes these paths: one predictable branch per send, packet and
// ack (SendSlot::dev, rx_dev(), an empty window ring).
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dpdk_endpoint.h"
#include "log.h"

namespace gw::drv::dpdk {

// ---- transport ------------------------------------------------------------------------------

Result<std::unique_ptr<StagingPool>> DpdkTransport::make_pool(const std::string& owner,
                                                              const StagingPool::Options& o) {
  if (!gpu_ops_) return Status(Code::kNotSupported, "dpdk: " + owner + ": " + dev_why_);
  auto pool = StagingPool::create(gpu_ops_, o, "dpdk " + owner);
  if (pool.ok() && !staging_logged_) {
    staging_logged_ = true;
    log_->info(
        "dpdk: CUDA device memory is staged through pinned host memory (the port cannot "
        "reach the GPU): sends in windows of {} KiB ({} per endpoint), receives per packet "
        "({} slots per transport)",
        opts_.staging.chunk_bytes / 1024, opts_.staging.slots, opts_.staging_rx_slots);
  }
  return pool;
}

Result<std::unique_ptr<StagingPool>> DpdkTransport::make_rx_pool() {
  StagingPool::Options o;
  o.chunk_bytes = opts_.seg_payload;
  o.slots = opts_.staging_rx_slots;
  return make_pool("receives into device memory", o);
}

// ---- send ---------------------------------------------------------------------------------

Status DpdkEndpoint::ensure_tx_pool() {
  if (tx_pool_) return Status();
  GW_ASSIGN_OR_RETURN(tx_pool_, t_->make_pool("sends to " + peer_name_, t_->opts().staging));
  tx_wins_.init(tx_pool_->slots());
  return Status();
}

bool DpdkEndpoint::tx_staged(const SendRequest& r, const uint8_t** data, uint64_t* room) {
  // Stage ahead: further windows of this send while slots are free.
  while (stage_next_ < r.len && !tx_wins_.full()) {
    const int slot = tx_pool_->acquire();
    if (slot < 0) break;
    const uint64_t len = std::min<uint64_t>(tx_pool_->chunk_bytes(), r.len - stage_next_);
    Status st = tx_pool_->stage_out(slot, static_cast<const uint8_t*>(r.buf) + stage_next_, len);
    if (!st.ok()) {
      tx_pool_->release(slot);
      fail(st.with_context("dpdk: staging a send to " + peer_name_));
      return false;
    }
    tx_wins_.push(TxWin{slot, msg_tx_, stage_next_, len, 0, false});
    t_->counters_.staged_tx_bytes += len;
    stage_next_ += len;
  }
  // Windows go out in order: the first one not yet sent holds seg_off_.
  for (size_t i = 0; i < tx_wins_.size(); ++i) {
    TxWin& w = tx_wins_.at(i);
    if (w.sent) continue;
    if (w.msg != msg_tx_ || seg_off_ < w.off || seg_off_ >= w.off + w.len) return false;
    auto done = tx_pool_->ready(w.slot);
    if (!done.ok()) {
      fail(done.status().with_context("dpdk: staging a send to " + peer_name_));
      return false;
    }
    if (!*done) return false;  // its copy is still running
    *data = tx_pool_->data(w.slot) + (seg_off_ - w.off);
    *room = w.off + w.len - seg_off_;
    return true;
  }
  return false;  // no slot free: acknowledgements release them
}

void DpdkEndpoint::tx_window_sent(uint32_t seq) {
  for (size_t i = 0; i < tx_wins_.size(); ++i) {
    TxWin& w = tx_wins_.at(i);
    if (w.sent) continue;
    w.sent = true;
    w.last_seq = seq;
    if (w.off + w.len == sends_.at(seg_idx_).req.len) stage_next_ = 0;  // the next send's turn
    return;
  }
}

void DpdkEndpoint::release_tx_windows() {
  while (!tx_wins_.empty()) {
    const TxWin& w = tx_wins_.front();
    if (!w.sent || seq_diff(w.last_seq, snd_una_) >= 0) return;
    tx_pool_->release(w.slot);
    tx_wins_.pop();
  }
}

// ---- receive ------------------------------------------------------------------------------

void DpdkEndpoint::mark_rx_dev(int m) {
  const core::InMsg& im = core_.msg(m);
  if (im.dest != core::Dest::kUser || !im.base || im.len == 0) return;
  if (!t_->is_device(im.req.buf, im.req.mr)) return;
  if (rx_dev_.empty()) rx_dev_.resize(static_cast<size_t>(core_.max_msgs()));  // once
  rx_dev_[static_cast<size_t>(m)] = RxDev{true, false, 0};
}

void DpdkEndpoint::copy_in_dev(int mi, const WireHdr& h, const rte_mbuf* m, uint32_t off) {
  StagingPool* pool = t_->rx_pool_now();
  uint8_t* dst = core_.msg(mi).base + h.offset;  // device memory
  for (uint32_t done = 0; done < h.seg_len;) {
    int slot = pool->acquire();
    if (slot < 0) {
      t_->poll_rx_copies(true);
      slot = pool->acquire();
    }
    if (slot < 0) {
      return fail(Status(Code::kInternal, "dpdk: no staging slot for a packet from " + peer_name_ +
                                              " to device memory"));
    }
    const uint32_t n =
        static_cast<uint32_t>(std::min<uint64_t>(h.seg_len - done, pool->chunk_bytes()));
    uint8_t* buf = pool->data(slot);
    const void* src = rte_pktmbuf_read(m, off + done, n, buf);
    if (src != buf) std::memcpy(buf, src, n);
    Status st = pool->stage_in(slot, dst + done, n);
    if (!st.ok()) {
      pool->release(slot);
      return fail(st.with_context("dpdk: copying a message from " + peer_name_ + " to the GPU"));
    }
    t_->rx_copies_.push(RxCopy{this, slot, mi});  // a ring entry per slot: never full here
    ++rx_dev_[static_cast<size_t>(mi)].copies;
    t_->counters_.staged_rx_bytes += n;
    done += n;
  }
  t_->counters_.bytes_received += h.seg_len;
}

void DpdkEndpoint::rx_copy_done(int m) {
  RxDev& x = rx_dev_[static_cast<size_t>(m)];
  if (!x.dev || x.copies == 0) return;
  if (--x.copies == 0 && x.arrived) {
    x = RxDev{};
    core_.finish(m);
  }
}

bool DpdkEndpoint::copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) {
  if (n == 0 || !t_->is_device(r.buf, r.mr)) return core::RecvHooks::copy_unexpected(r, src, n);
  // Buffered before its device receive was posted: one synchronous copy (rare path).
  auto pool = t_->rx_pool();
  Status st = pool.ok() ? (*pool)->copy_in_sync(r.buf, src, n) : pool.status();
  if (st.ok()) return true;
  fail(st.with_context("dpdk: copying a buffered message from " + peer_name_ + " to the GPU"));
  return false;
}

void DpdkEndpoint::drop_staging() {
  // Copies may still run into the caller's device buffers: finish them before it frees them.
  if (tx_pool_) (void)tx_pool_->drain();
  while (!tx_wins_.empty()) {
    tx_pool_->release(tx_wins_.front().slot);
    tx_wins_.pop();
  }
  stage_next_ = 0;
  t_->forget_rx_copies(this);
  for (auto& x : rx_dev_) x = RxDev{};
}

void DpdkTransport::forget_rx_copies(DpdkEndpoint* ep) {
  if (DriverTransport::forget_rx_copies(ep)) (void)rx_pool_->drain();
}

}  // namespace gw::drv::dpdk
