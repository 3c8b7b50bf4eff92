// Staging windows (rdma_staging.h): CUDA memory through pinned buffers. The sender's and the
// receiver's memory kinds are independent: a host sender answers windows, a staged sender
// answers a plain CTS.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "log.h"
#include "rdma_staging.h"

#include "rdma_endpoint.h"

namespace gw::drv::rdma {

Status Staging::ensure_pool() {
  if (in_.pool) return Status();
  RdmaTransport* t = ep_.t_;
  DeviceOps* ops = t->stage_ops();
  if (!ops) return Status(Code::kInternal, "rdma: no device-copy table for CUDA memory");
  for (Pinned* p : {&out_, &in_}) {
    const char* dir = p == &out_ ? "send" : "receive";
    auto pool = StagingPool::create(
        ops, t->opts().staging, std::string("rdma ") + dir + " staging toward " + ep_.peer_name());
    if (!pool.ok()) {
      out_ = Pinned{};
      return pool.status();
    }
    MrPtr mr(ibv_reg_mr(t->pd(), (*pool)->base(), (*pool)->bytes(),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    if (!mr) {
      const int err = errno;
      out_ = Pinned{};
      return Status(err == ENOMEM || err == EPERM ? Code::kResourceExhausted : Code::kSystemError,
                    "rdma: ibv_reg_mr(" + std::to_string((*pool)->bytes()) + " bytes of " + dir +
                        " staging buffers) on " + t->dev().name +
                        " failed (raise the locked-memory limit: `ulimit -l unlimited`, or "
                        "lower rdma.staging_slots / rdma.staging_chunk_bytes)",
                    err);
    }
    p->pool = std::move(*pool);
    p->mr = std::move(mr);
  }
  stage_out_.init(out_.pool->slots());
  wins_.assign(in_.pool->slots(), Win{});
  starved_.reserve(ep_.rndv_.size());
  t->log_->info(
      "rdma: CUDA memory to and from {} goes through 2 x {} pinned buffers of {} KiB "
      "({} device copies, no GPUDirect)",
      ep_.peer_name(), in_.pool->slots(), in_.pool->chunk_bytes() / 1024, ops->name());
  return Status();
}

Status Staging::copy_to_device(void* dst, const uint8_t* payload, size_t len) {
  GW_RETURN_IF_ERROR(ensure_pool());
  return in_.pool->copy_in_sync(dst, payload, len);
}

bool Staging::post_write(TxItem& it) {
  ep_state::SendSlot& s = ep_.sends_[it.id];
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
        ep_.fail(st.with_context("rdma: staging a send to " + ep_.peer_name()));
        return false;
      }
      stage_out_.push(
          StageOp{b, i, static_cast<uint32_t>(n), s.copied[i], s.copied[i] + n == stripe_end(i)});
      s.copied[i] += n;
    }
    if (s.copied[i] < stripe_end(i)) break;  // out of buffers: later stripes wait
  }
  if (!write_copied(it)) return false;
  for (uint32_t i = 0; i < it.stripes; ++i)
    if (s.off[i] < stripe_end(i)) return false;
  return true;
}

bool Staging::write_copied(TxItem& it) {
  ep_state::SendSlot& s = ep_.sends_[it.id];
  while (!stage_out_.empty()) {
    const StageOp& op = stage_out_.front();
    auto ready = out_.pool->ready(op.buf);
    if (!ready.ok()) {
      ep_.fail(ready.status().with_context("rdma: staging a send to " + ep_.peer_name()));
      return false;
    }
    if (!*ready || !ep_.lanes_.room(op.lane)) break;
    if (op.last && op.lane == 0 && ep_.credits_.available() <= 0) {
      ++ep_.counters().credit_stalls;
      break;
    }
    ibv_send_wr wr{};
    wr.wr_id = make_wr(WrKind::kStaged, ep_.id_,
                       (op.lane << 29) | (uint32_t{op.last} << 28) |
                           (static_cast<uint32_t>(op.buf) << 20) | it.id);
    wr.num_sge = 1;
    wr.opcode = op.last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = htonl(it.id2);
    wr.wr.rdma.remote_addr = it.addr + (op.off - it.base);
    wr.wr.rdma.rkey = it.rkey;
    // Signalled: its completion frees the buffer.
    ep_.lanes_.stage(
        op.lane, wr,
        ibv_sge{reinterpret_cast<uintptr_t>(out_.pool->data(op.buf)), op.len, out_.mr->lkey}, false,
        true);
    s.off[op.lane] = op.off + op.len;
    if (op.last && op.lane == 0) ep_.credits_.sent();
    stage_out_.pop();
  }
  return true;
}

void Staging::on_wc(const ibv_wc& wc, uint32_t idx) {
  const uint32_t lane = idx >> 29, b = (idx >> 20) & 0xFF, s = idx & 0xFFFFF;
  const bool last = (idx >> 28) & 1;
  if (lane < ep_.lanes_.size()) ep_.tx_.retired(ep_.lanes_.retire(lane));
  if (out_.pool && b < out_.pool->slots()) out_.pool->release(static_cast<int>(b));
  if (wc.status != IBV_WC_SUCCESS) {
    if (!ep_.failed()) ep_.fail(ep_.wc_error(wc, "RDMA WRITE"));
    return;
  }
  if (last) ep_.rndv_.stripe_written(s);
}

void Staging::start_recv(const RecvRequest& r, uint64_t tag, uint64_t len, uint32_t send_id) {
  Status st = ensure_pool();
  if (!st.ok() || ep_.rndv_.full()) {
    if (st.ok())
      st = Status(Code::kInternal, "rdma: out of rendezvous slots toward " + ep_.peer_name());
    ep_.t_->log_->warn("{}", st.to_string());
    ep_.complete(r.wr_id, tag, 0, Op::kRecv, st.code());
    TxItem it;
    it.type = MsgType::kReject;  // the sender's request completes; its data is dropped
    it.id = send_id;
    ep_.txq_.push(it);
    return;
  }
  const uint32_t s = ep_.rndv_.take(r, tag, len);
  ep_state::RndvRecv& rv = ep_.rndv_.slot(s);
  rv.staged = true;
  rv.send_id = send_id;
  if (request_windows(s)) starved_.push_back(s);
}

bool Staging::request_windows(uint32_t r) {
  ep_state::RndvRecv& rv = ep_.rndv_.slot(r);
  while (rv.next_off < rv.len && !ep_.txq_.full()) {
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
    ep_.txq_.push(it);
    rv.next_off += n;
    ++ep_.counters().staging_windows;
  }
  return rv.next_off < rv.len;
}

bool Staging::window_landed(uint32_t r) {
  int best = -1;
  for (size_t b = 0; b < wins_.size(); ++b) {
    const Win& w = wins_[b];
    if (w.rndv == r && !w.copying &&
        (best < 0 || static_cast<int32_t>(w.seq - wins_[static_cast<size_t>(best)].seq) < 0))
      best = static_cast<int>(b);
  }
  if (best < 0) {
    ep_.fail(ep_.protocol_error("RDMA WRITE for staged receive slot " + std::to_string(r) +
                                ", which asked for no window"));
    return false;
  }
  Win& w = wins_[static_cast<size_t>(best)];
  ep_state::RndvRecv& rv = ep_.rndv_.slot(r);
  Status st = in_.pool->stage_in(best, static_cast<uint8_t*>(rv.req.buf) + w.off, w.len);
  if (!st.ok()) {
    ep_.fail(st.with_context("rdma: staging a receive from " + ep_.peer_name()));
    return false;
  }
  w.copying = true;
  ++copies_in_;
  update_busy();
  return true;
}

void Staging::poll() {
  for (size_t b = 0; b < wins_.size() && copies_in_ > 0; ++b) {
    Win& w = wins_[b];
    if (!w.copying) continue;
    auto ready = in_.pool->ready(static_cast<int>(b));
    if (!ready.ok()) {
      ep_.fail(ready.status().with_context("rdma: staging a receive from " + ep_.peer_name()));
      return;
    }
    if (!*ready) continue;
    const uint32_t r = w.rndv;
    ep_state::RndvRecv& rv = ep_.rndv_.slot(r);
    rv.done += w.len;
    w = Win{};
    --copies_in_;
    in_.pool->release(static_cast<int>(b));
    if (rv.done == rv.len) {
      ep_.t_->core().count_received();
      ++ep_.counters().staged_recvs;
      ep_.counters().bytes_received += rv.len;
      ep_.complete(rv.req.wr_id, rv.tag, rv.len, Op::kRecv, Code::kOk);
      ep_.rndv_.put(r);
    }
  }
  size_t k = 0;
  while (k < starved_.size() && !request_windows(starved_[k])) ++k;  // the rest keep their turn
  if (k > 0) starved_.erase(starved_.begin(), starved_.begin() + static_cast<long>(k));
  update_busy();
}

void Staging::update_busy() {
  const bool b = !ep_.failed() && (copies_in_ > 0 || !stage_out_.empty());
  if (b != busy_) ep_.t_->staging_busy_ += b ? 1 : -1;
  busy_ = b;
}

void Staging::reset() {
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

void Staging::close() {
  if (busy_) --ep_.t_->staging_busy_;
  if (in_.pool) {  // copies may still read or write pinned buffers freed after
    (void)out_.pool->drain();
    (void)in_.pool->drain();
  }
}

}  // namespace gw::drv::rdma
