// RdmaEndpoint: posting. Work requests are staged into one chain per lane and posted with one
// ibv_post_send per lane per flush (rxe and mlx5 both pay per call: a system call on rxe, a
// doorbell on hardware). Only every kSignalEvery-th request, and every WRITE with immediate
// (its completion completes a send), is signalled; a signalled completion retires every
// request posted before it on that lane, which frees send-queue room and transmit buffers
// (used in order, as a ring). Receive buffers are reposted together at the start of a
// flush, before any header can advertise them as credits: when a poll finds nothing (so
// reposting is not between a message and the caller's answer), or at once when the peer may
// be down to a quarter of its credits. send_now() is the short way for the common eager send.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "rdma_endpoint.h"

namespace gw::drv::rdma {
namespace {
constexpr uint32_t kSignalEvery = 16;
}  // namespace

void RdmaEndpoint::init_posting() {
  const Options& o = t_->opts();
  for (Lane& lane : lanes_) {
    lane.wrs.assign(kStageMax, ibv_send_wr{});
    lane.sges.assign(kStageMax, ibv_sge{});
    lane.sigs.init(o.sq_depth);
  }
  // One fixed work request per receive buffer: a repost only links it into the next chain.
  rwrs_.assign(o.recv_depth, ibv_recv_wr{});
  rsges_.assign(o.recv_depth, ibv_sge{});
  for (uint32_t i = 0; i < o.recv_depth; ++i) {
    rsges_[i] = ibv_sge{reinterpret_cast<uintptr_t>(rx_mem_.get() + size_t{i} * slot_bytes_),
                        static_cast<uint32_t>(slot_bytes_), rx_mr_->lkey};
    rwrs_[i].wr_id = make_wr(WrKind::kRecv, id_, i);
    rwrs_[i].sg_list = &rsges_[i];
    rwrs_[i].num_sge = 1;
  }
  tx_free_ = o.sq_depth;
  credit_half_ = static_cast<int32_t>(std::max<uint32_t>(1, o.recv_depth / 2));
  credit_quarter_ = static_cast<int32_t>(std::max<uint32_t>(1, o.recv_depth / 4));
}

void RdmaEndpoint::repost(uint32_t slot) {
  ibv_recv_wr& wr = rwrs_[slot];  // a buffer is consumed once per posting: never linked twice
  wr.next = nullptr;
  (rstaged_ == 0 ? rfirst_ : rlast_->next) = &wr;
  rlast_ = &wr;
  ++rstaged_;
}

void RdmaEndpoint::post_recvs() {
  if (rstaged_ == 0 || lanes_.empty()) return;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(lanes_[0].qp.get(), rfirst_, &bad);
  const uint32_t n = rstaged_;
  rstaged_ = 0;
  if (rc != 0) return fail_verbs("ibv_post_recv", 0, rc);
  posted_ += n;
}

// An empty receive on a data lane: consumed by one stripe's WRITE with immediate.
void RdmaEndpoint::repost_lane(uint32_t lane) {
  ibv_recv_wr wr{};
  wr.wr_id = make_wr(WrKind::kLaneRecv, id_, lane);
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(lanes_[lane].qp.get(), &wr, &bad);
  if (rc != 0) fail_verbs("ibv_post_recv", lane, rc);
}

bool RdmaEndpoint::room(uint32_t l) const { return lanes_[l].sq_used < t_->opts().sq_depth; }

// Inlined into its callers here: it is on every send's path.
[[gnu::always_inline]] inline ibv_send_wr& RdmaEndpoint::next_wr(uint32_t l, const ibv_sge& sge,
                                                                 bool msg, bool must_signal) {
  Lane& lane = lanes_[l];
  if (lane.staged == kStageMax) post_staged(l);
  ++lane.unsignaled;
  lane.unsignaled_msgs += msg ? 1 : 0;
  ++lane.sq_used;
  ibv_sge& s = lane.sges[lane.staged];
  s = sge;
  ibv_send_wr& w = lane.wrs[lane.staged++];
  w.sg_list = &s;
  w.next = nullptr;
  w.send_flags = 0;
  // Signal when asked, every kSignalEvery requests, and when the queue is about to fill, so
  // that room always comes back.
  if (must_signal || lane.unsignaled >= kSignalEvery || lane.sq_used >= t_->opts().sq_depth) {
    w.send_flags = IBV_SEND_SIGNALED;
    lane.sigs.push(Sig{lane.unsignaled, lane.unsignaled_msgs});
    lane.unsignaled = lane.unsignaled_msgs = 0;
  }
  return w;
}

void RdmaEndpoint::stage(uint32_t l, const ibv_send_wr& wr, const ibv_sge& sge, bool msg,
                         bool must_signal) {
  ibv_send_wr& w = next_wr(l, sge, msg, must_signal);
  ibv_sge* s = w.sg_list;
  const unsigned flags = w.send_flags;
  w = wr;
  w.sg_list = s;
  w.next = nullptr;
  w.send_flags |= flags;
}

void RdmaEndpoint::post_staged(uint32_t l) {
  Lane& lane = lanes_[l];
  if (lane.staged == 0) return;
  for (uint32_t i = 0; i + 1 < lane.staged; ++i) lane.wrs[i].next = &lane.wrs[i + 1];
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(lane.qp.get(), lane.wrs.data(), &bad);
  lane.staged = 0;
  if (rc != 0) fail_verbs("ibv_post_send", l, rc);
}

void RdmaEndpoint::fail_verbs(const char* call, uint32_t lane, int rc) {
  fail(Status(Code::kSystemError,
              std::string("rdma: ") + call + " on queue pair " + std::to_string(lane) + " toward " +
                  peer_name_,
              rc));
}

void RdmaEndpoint::retire(uint32_t l) {
  Lane& lane = lanes_[l];
  if (lane.sigs.empty()) return;
  Sig s = lane.sigs.front();
  lane.sigs.pop();
  lane.sq_used -= std::min(lane.sq_used, s.wrs);
  if (l == 0) tx_free_ += s.msgs;
}

void RdmaEndpoint::stage_compact(uint32_t s, uint32_t lkey) {
  const SendRequest& r = sends_[s].req;
  ibv_send_wr& w =
      next_wr(0, ibv_sge{reinterpret_cast<uintptr_t>(r.buf), static_cast<uint32_t>(r.len), lkey},
              false, true);
  w.wr_id = make_wr(WrKind::kZeroCopy, id_, s);
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.imm_data = htonl(static_cast<uint32_t>(r.tag));
  ++sent_;
  ++t_->counters_.eager_sent;
  ++t_->counters_.zero_copy_sends;
}

bool RdmaEndpoint::send_now(const SendRequest& r) {
  if (r.len > eager_limit_ || (r.tag >> 32) != tx_tag_hi_ || !txq_.empty() || !room(0) ||
      credits() <= kCtrlCredits || r.tag == kAnyTag || (r.buf == nullptr && r.len > 0))
    return false;
  if (r.mr && (!r.mr->contains(r.buf, r.len) || r.mr->kind() == MemKind::kCudaDevice))
    return false;  // check_send's error, or GPUDirect memory (always rendezvous)
  if (t_->staged(r.buf, r.mr)) return false;
  const bool inl = r.len <= max_inline_;
  RegCache::Entry* e = inl ? nullptr : region_entry(r.mr);
  if (!inl && (!e || free_sends_.empty())) return false;  // copied into a transmit buffer
  // Only recorded: an eager message never takes an advertisement (but uses up its tag's).
  if (adverts_.empty())
    under_way(r.tag);
  else
    use_advert(0, r, false);
  if (!inl) {  // straight from the caller's buffer: done when its SEND completes
    const uint32_t s = free_sends_.back();
    free_sends_.pop_back();
    SendSlot& slot = sends_[s];  // what finish_send and the CTS checks read
    slot.req = r;
    slot.reg = nullptr;
    slot.stripes_left = 0;
    slot.awaiting_cts = slot.staged = slot.windowed = false;
    slot.used = true;
    stage_compact(s, e->mr->lkey);
    return true;
  }
  ibv_send_wr& w =
      next_wr(0, ibv_sge{reinterpret_cast<uintptr_t>(r.buf), static_cast<uint32_t>(r.len), 0},
              false, false);
  w.wr_id = make_wr(WrKind::kMsg, id_, 0);
  w.num_sge = r.len > 0 ? 1 : 0;
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.imm_data = htonl(static_cast<uint32_t>(r.tag));
  w.send_flags |= IBV_SEND_INLINE;  // the device copies the bytes when it is posted
  ++sent_;
  auto& c = t_->counters_;
  ++c.eager_sent;
  ++c.msgs_sent;
  c.bytes_sent += r.len;
  ++c.inline_sends;
  complete(r.wr_id, r.tag, r.len, Op::kSend, Code::kOk);
  return true;
}

bool RdmaEndpoint::post_msg(const TxItem& it) {
  if (!room(0) || tx_free_ == 0) return false;
  // Eager and RTS messages leave kCtrlCredits: the receiver may hold them (back-pressure),
  // and its answers (CTS, windows, adverts) must still find receive buffers.
  const bool data = it.type == MsgType::kEager || it.type == MsgType::kRts;
  if (credits() <= (data ? kCtrlCredits : 0)) {
    ++t_->counters_.credit_stalls;
    return false;
  }
  const uint32_t slot = tx_next_;
  uint8_t* buf = tx_mem_.get() + size_t{slot} * slot_bytes_;
  const bool eager = it.type == MsgType::kEager;
  const bool compact = eager && (it.tag >> 32) == tx_tag_hi_;
  if (compact && it.len > max_inline_) {
    // Registered memory goes out as it is: no copy; the send completes with its SEND.
    const SendSlot& s = sends_[it.id];
    RegCache::Entry* e = s.staged ? nullptr : region_entry(s.req.mr);
    if (e) {
      stage_compact(it.id, e->mr->lkey);
      return true;
    }
  }
  size_t total = 0;
  if (!compact) {
    MsgHdr h;
    h.type = static_cast<uint8_t>(it.type);
    h.stripes = it.stripes;
    h.posted = posted_;
    h.id = it.id;
    h.id2 = it.id2;
    h.tag = it.tag;
    h.len = it.len;
    h.addr = it.addr;
    h.rkey = it.rkey;
    std::memcpy(buf, &h, sizeof h);
    total = sizeof h;
    if (eager || it.type == MsgType::kRts) tx_tag_hi_ = static_cast<uint32_t>(it.tag >> 32);
  }
  if (eager) {
    const SendSlot& s = sends_[it.id];
    if (it.len && s.staged) {  // small CUDA message: a synchronous copy into the buffer
      Status st = out_.pool->copy_out_sync(buf + total, s.req.buf, it.len);
      if (!st.ok()) {
        fail(st.with_context("rdma: staging a send to " + peer_name_));
        return false;
      }
    } else if (it.len) {
      std::memcpy(buf + total, s.req.buf, it.len);
    }
    total += it.len;
  }
  ibv_send_wr wr{};
  wr.wr_id = make_wr(WrKind::kMsg, id_, slot);
  wr.num_sge = total > 0 ? 1 : 0;
  wr.opcode = compact ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = compact ? htonl(static_cast<uint32_t>(it.tag)) : 0;
  if (total <= max_inline_) {
    wr.send_flags = IBV_SEND_INLINE;
    ++t_->counters_.inline_sends;
  }
  stage(0, wr,
        ibv_sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(total), tx_mr_->lkey}, true,
        false);
  tx_next_ = (tx_next_ + 1) % t_->opts().sq_depth;
  --tx_free_;
  ++sent_;
  if (!compact) advertised_ = posted_;
  if (it.type == MsgType::kEager) {
    ++t_->counters_.eager_sent;
    finish_send(it.id, Code::kOk);  // the payload is copied: the caller's buffer is free
  }
  return true;
}

// Stripe i covers [i*per, (i+1)*per) and goes over lane i, in chunks of
// rdma.write_chunk_bytes; its last chunk carries the immediate. Only lane 0's immediate
// uses a receive buffer that needs a credit. @return true once every chunk is staged.
bool RdmaEndpoint::post_write(TxItem& it) {
  SendSlot& s = sends_[it.id];
  const uint64_t chunk_max = t_->opts().write_chunk;
  const uint64_t per = (it.len + it.stripes - 1) / it.stripes;
  if (!it.started) {
    for (uint32_t i = 0; i < it.stripes; ++i) s.off[i] = s.copied[i] = it.base + i * per;
    it.started = true;
  }
  if (s.staged) return post_write_staged(it);
  bool all = true;
  for (uint32_t i = 0; i < it.stripes; ++i) {
    const uint64_t end = it.base + std::min<uint64_t>(it.len, (i + 1) * per);
    while (s.off[i] < end) {
      const uint64_t chunk = std::min(chunk_max, end - s.off[i]);
      const bool last = s.off[i] + chunk == end;
      if (!room(i)) {
        all = false;
        break;
      }
      if (last && i == 0 && credits() <= 0) {
        ++t_->counters_.credit_stalls;
        all = false;
        break;
      }
      ibv_send_wr wr{};
      wr.wr_id = make_wr(last ? WrKind::kWriteImm : WrKind::kWrite, id_, (i << 24) | it.id);
      wr.num_sge = 1;
      wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
      wr.imm_data = htonl(it.id2);
      wr.wr.rdma.remote_addr = it.addr + (s.off[i] - it.base);
      wr.wr.rdma.rkey = it.rkey;
      stage(i, wr,
            ibv_sge{reinterpret_cast<uintptr_t>(s.req.buf) + s.off[i], static_cast<uint32_t>(chunk),
                    s.lkey},
            false, last);
      s.off[i] += chunk;
      if (last && i == 0) ++sent_;
    }
  }
  return all;
}

void RdmaEndpoint::post_credit() {
  if (!room(0)) return;
  credit_->my_posted = posted_;
  ibv_send_wr wr{};
  wr.wr_id = make_wr(WrKind::kCredit, id_, 0);
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = max_inline_ >= 4 ? IBV_SEND_INLINE : 0;
  wr.wr.rdma.remote_addr = peer_credit_addr_;
  wr.wr.rdma.rkey = peer_credit_rkey_;
  stage(0, wr, ibv_sge{reinterpret_cast<uintptr_t>(&credit_->my_posted), 4, credit_mr_->lkey},
        false, false);
  ++t_->counters_.credit_writes;
  advertised_ = posted_;
}

void RdmaEndpoint::flush() {
  if (failed() || lanes_.empty()) return;
  if (copies_in_ > 0 || !starved_.empty()) poll_staging();
  if (failed()) return;
  post_recvs();  // first: the headers below may advertise these buffers
  while (!failed() && !txq_.empty()) {
    TxItem& it = txq_.front();
    if (!(it.write ? post_write(it) : post_msg(it))) break;
    if (failed()) return;
    txq_.pop();
  }
  if (!failed() && credit_due()) post_credit();
  for (uint32_t l = 0; l < lanes_.size() && !failed(); ++l) post_staged(l);
  if (in_.pool) update_busy();
}

}  // namespace gw::drv::rdma
