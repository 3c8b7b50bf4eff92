// RdmaEndpoint: queue pair set-up and posting.
#include "rdma_endpoint.h"

#include <random>

#include "log.h"

namespace gw::drv::rdma {
namespace {

// The driver's handle of a caller's registration: shares a cache entry.
class RdmaMrHandle final : public MrHandle {
 public:
  RdmaMrHandle(RegCache* c, RegCache::Entry* e, void* addr, size_t len)
      : cache_(c), entry_(e), addr_(addr), len_(len) {}
  ~RdmaMrHandle() override {
    cache_->release(entry_);
    cache_->invalidate(addr_, len_);  // the caller may free this memory now
  }
  RegCache::Entry* entry() const { return entry_; }

 private:
  RegCache* cache_;
  RegCache::Entry* entry_;
  void* addr_;
  size_t len_;
};

}  // namespace

Result<MemoryRegion> make_region(RegCache& cache, void* addr, size_t len, MemKind kind,
                                 const GpuPath* cuda) {
  if (len == 0) return MemoryRegion(addr, 0, kind, 0, nullptr);
  GW_ASSIGN_OR_RETURN(RegCache::Entry * e, cache.acquire(addr, len, cuda));
  return MemoryRegion(addr, len, kind, e->mr->rkey,
                      std::make_unique<RdmaMrHandle>(&cache, e, addr, len));
}

RegCache::Entry* region_entry(const MemoryRegion* mr) {
  auto* h = mr ? static_cast<RdmaMrHandle*>(mr->handle()) : nullptr;
  return h ? h->entry() : nullptr;
}

RdmaEndpoint::RdmaEndpoint(RdmaTransport* t, uint32_t id)
    : t_(t), id_(id), cq_entries_(t->cq_per_endpoint()) {
  ctrl_item_.kind = PollItem::kCtrl;
  ctrl_item_.ep = this;
}

RdmaEndpoint::~RdmaEndpoint() {
  t_->endpoint_gone(this);
  lanes_.clear();  // the queue pairs go before the memory they point at is deregistered
  for (auto& s : sends_)
    if (s.used && s.reg) t_->regcache().release(s.reg);
  for (uint32_t i = 0; i < rndv_.size(); ++i) {  // before the core frees the pulls' buffers
    const ep_state::RndvRecv& r = rndv_.slot(i);
    if (r.used && r.reg) t_->regcache().release(r.reg);
  }
  staging_.close();
}

// Lane `i`'s queue pair, in INIT. @return ResourceExhausted/SystemError.
Status RdmaEndpoint::create_lane(uint32_t i, uint32_t recv_depth) {
  const Options& o = t_->opts();
  const std::string& dev = t_->dev().name;
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = t_->verbs_cq();
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = o.sq_depth;
  qa.cap.max_recv_wr = recv_depth;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = i == 0 ? o.max_inline : 0;
  QpPtr qp(ibv_create_qp(t_->pd(), &qa));
  if (!qp && qa.cap.max_inline_data > 0) {  // the device may not inline that much
    qa.cap.max_inline_data = 0;
    qp.reset(ibv_create_qp(t_->pd(), &qa));
  }
  if (!qp) {
    return Status(Code::kResourceExhausted,
                  "rdma: ibv_create_qp on " + dev + " (queue pair " + std::to_string(i) + " of " +
                      std::to_string(o.qps) + ", send " + std::to_string(o.sq_depth) +
                      ", receive " + std::to_string(recv_depth) +
                      " work requests) failed; lower rdma.sq_depth, rdma.recv_depth, "
                      "rdma.max_outstanding or rdma.qps_per_conn",
                  errno);
  }
  if (i == 0) max_inline_ = qa.cap.max_inline_data;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = static_cast<uint8_t>(t_->dev().port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp.get(), &a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return Status(Code::kSystemError, "rdma: QP to INIT on " + dev, errno);
  lanes_.add(std::move(qp));
  return Status();
}

Status RdmaEndpoint::create() {
  const Options& o = t_->opts();
  const std::string& dev = t_->dev().name;
  const size_t slot_bytes = (sizeof(MsgHdr) + o.eager_bytes + 63) / 64 * 64;
  GW_RETURN_IF_ERROR(rx_.init(t_->pd(), o.recv_depth, slot_bytes, id_, dev));
  GW_RETURN_IF_ERROR(tx_.init(t_->pd(), o.sq_depth, slot_bytes, dev));
  GW_RETURN_IF_ERROR(credits_.init(t_->pd(), o.recv_depth, dev));
  // Rendezvous slots: at most the peer's outstanding sends, doubled for slack. Each lane
  // beyond the first pre-posts one receive per slot: a slot takes one stripe per lane.
  const uint32_t rndv_slots = 2 * o.max_outstanding;
  for (uint32_t i = 0; i < o.qps; ++i)
    GW_RETURN_IF_ERROR(create_lane(i, i == 0 ? o.recv_depth : rndv_slots));
  std::random_device rd;
  psn_ = rd() & 0xFFFFFF;

  sends_.resize(o.max_outstanding);
  for (uint32_t i = o.max_outstanding; i-- > 0;) free_sends_.push_back(i);
  rndv_.init(rndv_slots);
  held_.init(o.recv_depth);
  // Buffered messages: every eager one lane 0's buffers can take, and the peer's rendezvous
  // requests (its outstanding sends), twice over for slack; beyond, back-pressure. Message
  // slots: those, the pulls a receive claimed (one per rendezvous slot) and the one being
  // matched. Any-source receives take its messages once the caller has it (bind()).
  const size_t buffered = 2 * (size_t{o.recv_depth} + o.max_outstanding);
  core_.init(&t_->core(), this, o.max_outstanding, buffered + rndv_slots + 1, this, buffered);
  core_.set_any_source(false);
  txq_.init(6 * size_t{o.max_outstanding} + 16);
  lanes_.init(o.sq_depth);
  adverts_.init(o.max_outstanding);
  for (uint32_t i = 0; i < o.recv_depth; ++i) rx_.repost(i);
  post_recvs();
  credits_.told();  // the Hello tells the peer recv_depth
  for (uint32_t l = 1; l < lanes_.size(); ++l)
    for (uint32_t i = 0; i < rndv_slots; ++i) repost_lane(l);
  return core_.error();
}

Hello RdmaEndpoint::local_hello(uint64_t key) const {
  const DeviceChoice& d = t_->dev();
  Hello h;
  h.key = key;
  h.lid = d.lid;
  h.qpn = lanes_.qp(0)->qp_num;
  h.nqps = static_cast<uint8_t>(lanes_.size());
  for (size_t i = 1; i < lanes_.size(); ++i) h.qpn_more[i - 1] = lanes_.qp(i)->qp_num;
  h.psn = psn_;
  std::memcpy(h.gid, d.gid.raw, 16);
  h.mtu = static_cast<uint8_t>(d.mtu);
  h.recv_depth = t_->opts().recv_depth;
  h.eager_bytes = t_->opts().eager_bytes;
  h.credit_rkey = credits_.rkey();
  h.credit_addr = credits_.addr();
  return h;
}

Status RdmaEndpoint::connect_qp(const Hello& r, const std::string& who) {
  const DeviceChoice& d = t_->dev();
  const Options& o = t_->opts();
  if (r.magic != kHelloMagic || r.version != kWireVersion || r.recv_depth == 0 ||
      r.mtu < IBV_MTU_256 || r.mtu > IBV_MTU_4096 || r.nqps < 1 || r.nqps > kMaxQps) {
    return Status(Code::kProtocolError,
                  "rdma: malformed hello from " + who + " (magic " + std::to_string(r.magic) +
                      ", version " + std::to_string(r.version) + ", " + std::to_string(r.nqps) +
                      " queue pairs; this side speaks version " + std::to_string(kWireVersion) +
                      ")");
  }
  // Both sides use the fewer queue pairs; the surplus ones are destroyed unused.
  lanes_.keep(r.nqps);
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const uint32_t qpn = i == 0 ? r.qpn : r.qpn_more[i - 1];
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = std::min(d.mtu, static_cast<ibv_mtu>(r.mtu));
    a.dest_qp_num = qpn & 0xFFFFFF;
    a.rq_psn = r.psn & 0xFFFFFF;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(d.port);
    a.ah_attr.dlid = r.lid;
    if (d.roce || r.lid == 0) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d.gid_index);
      a.ah_attr.grh.hop_limit = 64;
    }
    ibv_qp* qp = lanes_.qp(i);
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
      return Status(Code::kSystemError,
                    "rdma: QP to RTR toward " + who + " (QPN " + std::to_string(qpn) + ", GID " +
                        gid_to_string(*reinterpret_cast<const ibv_gid*>(r.gid)) + ")",
                    errno);
    }
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = o.qp_timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.sq_psn = psn_;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
      return Status(Code::kSystemError, "rdma: QP to RTS toward " + who, errno);
  }
  eager_limit_ = std::min(o.eager_bytes, r.eager_bytes);
  credits_.connect(r.recv_depth, r.credit_addr, r.credit_rkey);
  return Status();
}

void RdmaEndpoint::bind(const ConnectParams& p, Fd ctrl) {
  peer_id_ = p.peer_id;
  peer_name_ = p.peer_name.empty() ? "peer " + std::to_string(p.peer_id) : p.peer_name;
  bound_ = true;
  core_.set_any_source(true);
  if (ctrl) ctrl_ = std::move(ctrl);
  if (ctrl_) t_->watch_ctrl(this, ctrl_.get());
}

Result<size_t> RdmaEndpoint::post_send(std::span<const SendRequest> reqs) {
  if (const Status& no = core_.refusal(); !no.ok()) [[unlikely]]
    return no;
  size_t n = 0;
  for (; n < reqs.size(); ++n) {
    const SendRequest& r = reqs[n];
    if (!core_.reserve()) break;  // its completion first (rdma.cq_depth)
    if (send_now(r)) continue;
    Status st;
    if (!queue_send(r, &st)) {
      core_.unreserve();
      if (n == 0 && !st.ok()) return st;
      break;
    }
  }
  // Only send_now()s: post them, nothing else (receive reposts wait for an idle poll).
  if (txq_.empty() && !credit_urgent())
    lanes_.post(0);
  else
    flush();
  return n;
}

// A send that does not go now: a slot, then its message queued (or written into an advertised
// receive). @return false: stop here (`st` says why; ok: out of slots or queue room).
bool RdmaEndpoint::queue_send(const SendRequest& r, Status* st) {
  *st = core::check_send("rdma", peer_name_, r, t_->properties().max_message_size);
  if (!st->ok() || free_sends_.empty() || txq_.full()) return false;
  TxItem it;
  it.tag = r.tag;
  it.len = r.len;
  // CUDA memory without GPUDirect is copied through pinned buffers (rdma_staging.cc).
  const bool staged = r.len > 0 && t_->staged(r.buf, r.mr);
  if (staged) {
    *st = staging_.ensure_pool();
    if (!st->ok()) return false;
  }
  uint32_t s = free_sends_.back();
  SendSlot& slot = sends_[s];
  slot = SendSlot{};
  slot.req = r;
  slot.staged = staged;
  // GPUDirect CUDA memory is never copied by the CPU: rendezvous whatever its size.
  const bool cuda = !staged && r.mr && r.mr->kind() == MemKind::kCudaDevice;
  if (r.len > eager_limit_ || (cuda && r.len > 0)) {
    RegCache::Entry* e = staged ? nullptr : region_entry(r.mr);
    if (!e && !staged) {
      auto got = t_->regcache().acquire(r.buf, r.len);
      if (!got.ok()) {
        *st = got.status();
        return false;
      }
      e = slot.reg = *got;
    }
    slot.lkey = e ? e->mr->lkey : 0;
    slot.awaiting_cts = true;
    it.type = MsgType::kRts;
  }
  free_sends_.pop_back();
  slot.used = true;
  it.id = s;
  if (adverts_.use(s, r, it.type == MsgType::kRts)) return true;  // written straight in
  txq_.push(it);
  return true;
}

Result<size_t> RdmaEndpoint::post_recv(std::span<const RecvRequest> reqs) {
  auto check = [&](const RecvRequest& r) { return core::check_recv("rdma", peer_name_, r); };
  auto posted = [&](int i) {
    if (core_.recvs()[i].req.len > eager_limit_) adverts_.offer(i);
  };
  // A peer that left cleanly may have left messages in their receive buffers (held).
  auto waiting = [&](uint64_t tag) { return held_tag(tag); };
  auto n = core_.post_recv(reqs, check, posted, waiting);
  // Messages left in their receive buffers may match these now.
  if (!held_.empty()) retry_held();
  // Answers to buffered rendezvous requests go now; advertisements wait for the next send or
  // progress pass (one chained post, not two).
  if (take_took()) flush();
  return n;
}

}  // namespace gw::drv::rdma
