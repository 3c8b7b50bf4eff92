// TCP data path for CUDA device memory: the socket cannot read or write it, so payload is
// staged through pinned host slots (gw::StagingPool). Send: each device chunk of a message
// (at most one slot long) is copied device->host ahead of the wire, a few slots per stream,
// and written once its copy is done. Receive: payload is read into a slot, copied host->device
// when the slot is full or the chunk ends, and the receive completes when its last copy has.
// Both directions overlap the copies with the network.
#include <cstring>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {

Result<std::unique_ptr<StagingPool>> TcpTransport::make_pool(const std::string& owner) {
  if (!gpu_ops_) return Status(Code::kNotSupported, "tcp: " + owner + ": " + dev_why_);
  // At least a slot per stream: each stream may hold slots/streams, so none starves another
  // (a stream the receiver is not reading keeps its slots until it drains).
  StagingPool::Options o = opts_.staging;
  o.slots = std::max<uint32_t>(o.slots, static_cast<uint32_t>(opts_.streams));
  auto pool = StagingPool::create(gpu_ops_, o, "tcp " + owner);
  if (pool.ok()) {
    log_->info(
        "tcp: {}: CUDA device memory is staged through {} pinned host slots of {} KiB "
        "(TCP has no GPUDirect path)",
        owner, (*pool)->slots(), (*pool)->chunk_bytes() / 1024);
  }
  return pool;
}

Status TcpEndpoint::ensure_tx_pool() {
  if (tx_pool_) return Status();
  GW_ASSIGN_OR_RETURN(tx_pool_, t_->make_pool("sends to " + peer_name_));
  return Status();
}

void TcpEndpoint::stage_tx(Stream& s) {
  const uint32_t cap = std::max<uint32_t>(
      1, tx_pool_->slots() / static_cast<uint32_t>(std::max<size_t>(1, streams_.size())));
  for (size_t i = 0; i < s.txq.size(); ++i) {
    Chunk& c = s.txq.at(i);
    if (!c.dev || c.payload) continue;
    if (c.stage_slot < 0) {
      if (s.tx_staged >= cap) return;
      const int slot = tx_pool_->acquire();
      if (slot < 0) return;  // back-pressure: other streams hold the slots
      Status st = tx_pool_->stage_out(slot, c.dev, c.hdr.chunk_len);
      if (!st.ok()) {
        tx_pool_->release(slot);
        return fail(st.with_context("tcp: staging a send to " + peer_name_));
      }
      c.stage_slot = slot;
      ++s.tx_staged;
      t_->counters_.staged_tx_bytes += c.hdr.chunk_len;
    }
    auto done = tx_pool_->ready(c.stage_slot);
    if (!done.ok()) return fail(done.status().with_context("tcp: staging a send to " + peer_name_));
    if (*done) c.payload = tx_pool_->data(c.stage_slot);
  }
}

void TcpEndpoint::release_tx_slot(Stream& s, Chunk& c) {
  tx_pool_->release(c.stage_slot);
  c.stage_slot = -1;
  --s.tx_staged;
}

bool TcpEndpoint::read_staged(Stream& s, size_t have, int* reads) {
  StagingPool* pool = t_->rx_pool_now();
  if (s.rx_slot < 0) {
    s.rx_slot = pool->acquire();
    if (s.rx_slot < 0) {
      t_->poll_rx_copies();
      s.rx_slot = pool->acquire();
      if (s.rx_slot < 0) return false;  // all slots are being copied: read again later
    }
    s.rx_fill = 0;
    s.rx_slot_dst = s.dst;
  }
  uint8_t* buf = pool->data(s.rx_slot) + s.rx_fill;
  const size_t room = std::min<uint64_t>(pool->chunk_bytes() - s.rx_fill, s.chunk_left);
  size_t got = 0;
  if (have > 0) {
    got = std::min(have, room);
    std::memcpy(buf, s.stage.get() + s.stage_begin, got);
    s.stage_begin += got;
  } else if (room > 0) {
    if (!s.readable || (*reads)++ >= kMaxReadsPerPoll) return false;
    if (!read_some(s, buf, room, &got)) return false;
  }
  s.rx_fill += got;
  s.chunk_left -= got;
  s.dst += got;
  if (s.rx_fill == pool->chunk_bytes() || s.chunk_left == 0) commit_rx_slot(s);
  return !failed();
}

void TcpEndpoint::commit_rx_slot(Stream& s) {
  StagingPool* pool = t_->rx_pool_now();
  Status st = pool->stage_in(s.rx_slot, s.rx_slot_dst, s.rx_fill);
  if (!st.ok()) {
    pool->release(s.rx_slot);
    s.rx_slot = -1;
    return fail(st.with_context("tcp: copying a message from " + peer_name_ + " to the GPU"));
  }
  t_->counters_.staged_rx_bytes += s.rx_fill;
  // The ring holds one entry per slot, so it cannot be full here.
  t_->rx_copies_.push(RxCopy{this, s.rx_slot, s.msg});
  ++ext_[s.msg].copies;
  s.rx_slot = -1;
}

void TcpEndpoint::rx_copy_done(int m) {
  MsgExt& x = ext_[m];
  if (!core_.msg(m).active || x.copies == 0) return;
  if (--x.copies == 0 && x.received == core_.msg(m).len) core_.finish(m);
}

}  // namespace gw::drv::tcp
