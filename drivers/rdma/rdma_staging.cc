// RdmaEndpoint: CUDA memory without GPUDirect (rdma.gpu = staging). Nothing registers device
// memory; each endpoint has a few pinned buffers (gw::StagingPool), registered once.
// Send: each buffer is filled by a device-to-host copy, then RDMA-written to the receiver
// (the stripe's last buffer with immediate), so copies run ahead of the wire. Receive: the
// receiver asks for the message window by window (kWin, one per free buffer), and copies each
// window to the device as it lands, asking for the next when the copy has finished. Small
// messages copy synchronously (eager). The sender's and the receiver's memory kinds are
// independent: a host sender answers windows, a staged sender answers a plain CTS.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

Status RdmaEndpoint::ensure_pool() {
  if (in_.pool) return Status();
  DeviceOps* ops = t_->stage_ops();
  if (!ops) return Status(Code::kInternal, "rdma: no device-copy table for CUDA memory");
  for (Pinned* p : {&out_, &in_}) {
    const char* dir = p == &out_ ? "send" : "receive";
    auto pool = StagingPool::create(ops, t_->opts().staging,
                                    std::string("rdma ") + dir + " staging toward " + peer_name_);
    if (!pool.ok()) {
      out_ = Pinned{};
      return pool.status();
    }
    MrPtr mr(ibv_reg_mr(t_->pd(), (*pool)->base(), (*pool)->bytes(),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    if (!mr) {
      const int err = errno;
      out_ = Pinned{};
      return Status(err == ENOMEM || err == EPERM ? Code::kResourceExhausted : Code::kSystemError,
                    "rdma: ibv_reg_mr(" + std::to_string((*pool)->bytes()) + " bytes of " + dir +
                        " staging buffers) on " + t_->dev().name +
                        " failed (raise the locked-memory limit: `ulimit -l unlimited`, or "
                        "lower rdma.staging_slots / rdma.staging_chunk_bytes)",
                    err);
    }
    p->pool = std::move(*pool);
    p->mr = std::move(mr);
  }
  stage_out_.init(out_.pool->slots());
  wins_.assign(in_.pool->slots(), Win{});
  starved_.reserve(rndv_.size());
  t_->log_->info(
      "rdma: CUDA memory to and from {} goes through 2 x {} pinned buffers of {} KiB "
      "({} device copies, no GPUDirect)",
      peer_name_, in_.pool->slots(), in_.pool->chunk_bytes() / 1024, ops->name());
  return Status();
}

Status RdmaEndpoint::copy_to_device(void* dst, const uint8_t* payload, size_t len) {
  GW_RETURN_IF_ERROR(ensure_pool());
  return in_.pool->copy_in_sync(dst, payload, len);
}

bool RdmaEndpoint::post_write_staged(TxItem& it) {
  SendSlot& s = sends_[it.id];
  const uint64_t per = (it.len + it.stripes - 1) / it.stripes;
  auto stripe_end = [&](uint32_t i) { return it.base + std::min<uint64_t>(it.len, (i + 1) * per); };
  // Copies first, stripe by stripe, into every free buffer.
  for (uint32_t i = 0; i < it.stripes && !stage_out_.full(); ++i) {
    while (s.copied[i] < stripe_end(i) && !stage_out_.full()) {
      const int b = out_.pool->acquire();
      if (b < 0) break;
      const uint64_t n = std::min<uint64_t>(out_.pool->chunk_bytes(), stripe_end(i) - s.copied[i]);
      Status st = out_.pool->stage_out(b, static_cast<const uint8_t*>(s.req.buf) + s.copied[i], n);
      if (!st.ok()) {
        out_.pool->release(b);
        fail(st.with_context("rdma: staging a send to " + peer_name_));
        return false;
      }
      stage_out_.push(
          StageOp{b, i, static_cast<uint32_t>(n), s.copied[i], s.copied[i] + n == stripe_end(i)});
      s.copied[i] += n;
    }
    if (s.copied[i] < stripe_end(i)) break;  // out of buffers: later stripes wait
  }
  // Then the writes of the buffers whose copies finished, in order.
  while (!stage_out_.empty()) {
    const StageOp& op = stage_out_.front();
    auto ready = out_.pool->ready(op.buf);
    if (!ready.ok()) {
      fail(ready.status().with_context("rdma: staging a send to " + peer_name_));
      return false;
    }
    if (!*ready || !room(op.lane)) break;
    if (op.last && op.lane == 0 && credits() <= 0) {
      ++t_->counters_.credit_stalls;
      break;
    }
    ibv_send_wr wr{};
    wr.wr_id = make_wr(WrKind::kStaged, id_,
                       (op.lane << 29) | (uint32_t{op.last} << 28) |
                           (static_cast<uint32_t>(op.buf) << 20) | it.id);
    wr.num_sge = 1;
    wr.opcode = op.last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = htonl(it.id2);
    wr.wr.rdma.remote_addr = it.addr + (op.off - it.base);
    wr.wr.rdma.rkey = it.rkey;
    // Signalled: its completion frees the buffer.
    stage(op.lane, wr,
          ibv_sge{reinterpret_cast<uintptr_t>(out_.pool->data(op.buf)), op.len, out_.mr->lkey},
          false, true);
    s.off[op.lane] = op.off + op.len;
    if (op.last && op.lane == 0) ++sent_;
    stage_out_.pop();
  }
  for (uint32_t i = 0; i < it.stripes; ++i)
    if (s.off[i] < stripe_end(i)) return false;
  return true;
}

void RdmaEndpoint::on_staged_wc(const ibv_wc& wc, uint32_t idx) {
  const uint32_t lane = idx >> 29, b = (idx >> 20) & 0xFF, s = idx & 0xFFFFF;
  const bool last = (idx >> 28) & 1;
  if (lane < lanes_.size()) retire(lane);
  if (out_.pool && b < out_.pool->slots()) out_.pool->release(static_cast<int>(b));
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) fail(wc_error(wc, "RDMA WRITE"));
    return;
  }
  if (last) stripe_written(s);
}

void RdmaEndpoint::start_staged_recv(const RecvRequest& r, uint64_t tag, uint64_t len,
                                     uint32_t send_id) {
  Status st = ensure_pool();
  if (!st.ok() || free_rndv_.empty()) {
    if (st.ok()) st = Status(Code::kInternal, "rdma: out of rendezvous slots toward " + peer_name_);
    t_->log_->warn("{}", st.to_string());
    complete(r.wr_id, tag, 0, Op::kRecv, st.code());
    TxItem it;
    it.type = MsgType::kReject;  // the sender's request completes; its data is dropped
    it.id = send_id;
    txq_.push(it);
    return;
  }
  const uint32_t s = free_rndv_.back();
  free_rndv_.pop_back();
  RndvRecv& rv = rndv_[s];
  rv = RndvRecv{};
  rv.req = r;
  rv.tag = tag;
  rv.len = len;
  rv.used = true;
  rv.staged = true;
  rv.send_id = send_id;
  if (request_windows(s)) starved_.push_back(s);
}

bool RdmaEndpoint::request_windows(uint32_t r) {
  RndvRecv& rv = rndv_[r];
  while (rv.next_off < rv.len && !txq_.full()) {
    const int b = in_.pool->acquire();
    if (b < 0) break;
    const uint64_t n = std::min<uint64_t>(in_.pool->chunk_bytes(), rv.len - rv.next_off);
    wins_[static_cast<size_t>(b)] =
        Win{r, static_cast<uint32_t>(n), win_seq_++, rv.next_off, false};
    TxItem it;
    it.type = MsgType::kWin;
    it.id = rv.send_id;
    it.id2 = r;
    it.tag = rv.next_off;
    it.len = n;
    it.addr = reinterpret_cast<uintptr_t>(in_.pool->data(b));
    it.rkey = in_.mr->rkey;
    txq_.push(it);
    rv.next_off += n;
    ++t_->counters_.staging_windows;
  }
  return rv.next_off < rv.len;
}

bool RdmaEndpoint::window_landed(uint32_t r) {
  int best = -1;
  for (size_t b = 0; b < wins_.size(); ++b) {
    const Win& w = wins_[b];
    if (w.rndv == r && !w.copying &&
        (best < 0 || static_cast<int32_t>(w.seq - wins_[static_cast<size_t>(best)].seq) < 0))
      best = static_cast<int>(b);
  }
  if (best < 0) {
    fail(protocol_error("RDMA WRITE for staged receive slot " + std::to_string(r) +
                        ", which asked for no window"));
    return false;
  }
  Win& w = wins_[static_cast<size_t>(best)];
  RndvRecv& rv = rndv_[r];
  Status st = in_.pool->stage_in(best, static_cast<uint8_t*>(rv.req.buf) + w.off, w.len);
  if (!st.ok()) {
    fail(st.with_context("rdma: staging a receive from " + peer_name_));
    return false;
  }
  w.copying = true;
  ++copies_in_;
  update_busy();
  return true;
}

void RdmaEndpoint::poll_staging() {
  for (size_t b = 0; b < wins_.size() && copies_in_ > 0; ++b) {
    Win& w = wins_[b];
    if (!w.copying) continue;
    auto ready = in_.pool->ready(static_cast<int>(b));
    if (!ready.ok()) {
      fail(ready.status().with_context("rdma: staging a receive from " + peer_name_));
      return;
    }
    if (!*ready) continue;
    const uint32_t r = w.rndv;
    RndvRecv& rv = rndv_[r];
    rv.done += w.len;
    w = Win{};
    --copies_in_;
    in_.pool->release(static_cast<int>(b));
    if (rv.done == rv.len) {
      t_->core().count_received();
      ++t_->counters_.staged_recvs;
      t_->counters_.bytes_received += rv.len;
      complete(rv.req.wr_id, rv.tag, rv.len, Op::kRecv, Code::kOk);
      rv = RndvRecv{};
      free_rndv_.push_back(r);
    }
  }
  size_t k = 0;
  while (k < starved_.size() && !request_windows(starved_[k])) ++k;  // the rest keep their turn
  if (k > 0) starved_.erase(starved_.begin(), starved_.begin() + static_cast<long>(k));
  update_busy();
}

void RdmaEndpoint::update_busy() {
  const bool b = !failed() && (copies_in_ > 0 || !stage_out_.empty());
  if (b != busy_) t_->staging_busy_ += b ? 1 : -1;
  busy_ = b;
}

void RdmaEndpoint::reset_staging() {
  if (!in_.pool) return;
  // No copy may touch the caller's memory once its request has failed.
  (void)out_.pool->drain();
  (void)in_.pool->drain();
  while (!stage_out_.empty()) {
    out_.pool->release(stage_out_.front().buf);
    stage_out_.pop();
  }
  for (Win& w : wins_) w = Win{};
  starved_.clear();
  copies_in_ = 0;
  update_busy();
}

}  // namespace gw::drv::rdma
