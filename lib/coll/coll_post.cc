// Posting a collective's requests: one at a time, or a burst of one step's requests to one
// peer in a single post call (one writev on tcp, one doorbell on rdma, one burst on dpdk).
#include <algorithm>
#include <string>

#include "coll_impl.h"

namespace gw {
namespace {

constexpr uint64_t kTagMagic = 0xC0;
constexpr uint64_t kP2pTagMagic = 0xC1;  // point-to-point: the caller's 32-bit tag

}  // namespace

SendRequest coll::Poster::send_req(coll::Task& op, const void* buf, size_t len, uint32_t unit,
                                   uint32_t tag_unit) {
  return SendRequest{buf, len,
                     coll::make_tag(kTagMagic, im.epoch, op.seq, tag_unit == ~0u ? unit : tag_unit),
                     coll::make_wr(im.slot_of(op), op.gen, true, unit), mr_for(op, buf, len)};
}

RecvRequest coll::Poster::recv_req(coll::Task& op, void* buf, size_t len, uint32_t unit,
                                   uint32_t tag_unit) {
  return RecvRequest{buf, len,
                     coll::make_tag(kTagMagic, im.epoch, op.seq, tag_unit == ~0u ? unit : tag_unit),
                     coll::make_wr(im.slot_of(op), op.gen, false, unit), mr_for(op, buf, len)};
}

Result<size_t> coll::Poster::sends(coll::Task& op, int peer, std::span<const SendRequest> reqs) {
  auto k = im.group.endpoint(peer).post_send(reqs);
  if (!k.ok()) {
    return im.faults.post_error(k.status(), peer,
                                im.where(op) + ": send to rank " + std::to_string(peer));
  }
  for (size_t i = 0; i < *k; ++i) im.faults.count_post(peer, true);
  return *k;
}

Result<size_t> coll::Poster::recvs(coll::Task& op, int peer, std::span<const RecvRequest> reqs) {
  auto k = im.group.endpoint(peer).post_recv(reqs);
  if (!k.ok()) {
    return im.faults.post_error(k.status(), peer,
                                im.where(op) + ": receive from rank " + std::to_string(peer));
  }
  for (size_t i = 0; i < *k; ++i) im.faults.count_post(peer, false);
  return *k;
}

Result<bool> coll::Poster::send(coll::Task& op, int peer, const void* buf, size_t len,
                                uint32_t unit, uint32_t tag_unit) {
  const SendRequest r = send_req(op, buf, len, unit, tag_unit);
  GW_ASSIGN_OR_RETURN(size_t k, sends(op, peer, {&r, 1}));
  return k == 1;
}

bool coll::Poster::held_header(coll::Task& op, int peer, SendRequest* r, int* idx) {
  for (uint32_t i = 0; i < op.nheld; ++i) {
    if (op.held[i].peer != peer) continue;
    *r = send_req(op, &op.desc, sizeof(op.desc), op.held[i].unit);
    *idx = static_cast<int>(i);
    return true;
  }
  *idx = -1;
  return false;
}

size_t coll::Poster::took_held(coll::Task& op, int idx, size_t took) {
  if (idx < 0 || took == 0) return took;
  ++op.hdr_pending;
  op.held[static_cast<size_t>(idx)] = op.held[--op.nheld];
  return took - 1;
}

Result<bool> coll::Poster::send_with_held(coll::Task& op, int peer, const void* buf, size_t len,
                                          uint32_t unit, uint32_t tag_unit) {
  SendRequest r[2];
  int idx;
  if (!held_header(op, peer, &r[0], &idx)) return send(op, peer, buf, len, unit, tag_unit);
  r[1] = send_req(op, buf, len, unit, tag_unit);
  GW_ASSIGN_OR_RETURN(size_t took, sends(op, peer, r));
  return took_held(op, idx, took) == 1;
}

Result<bool> coll::Poster::send_held(coll::Task& op) {
  while (op.nheld > 0) {
    const coll::Task::HeldHdr h = op.held[op.nheld - 1];
    GW_ASSIGN_OR_RETURN(bool took, send(op, h.peer, &op.desc, sizeof(op.desc), h.unit));
    if (!took) return false;
    ++op.hdr_pending;
    --op.nheld;
  }
  return true;
}

Result<bool> coll::Poster::recv(coll::Task& op, int peer, void* buf, size_t len, uint32_t unit,
                                uint32_t tag_unit) {
  const RecvRequest r = recv_req(op, buf, len, unit, tag_unit);
  GW_ASSIGN_OR_RETURN(size_t k, recvs(op, peer, {&r, 1}));
  return k == 1;
}

Result<bool> coll::Poster::p2p(coll::Task& op, int peer, bool is_send, void* buf, size_t len,
                               uint32_t tag) {
  const uint64_t t = coll::make_tag(kP2pTagMagic, im.epoch, 0, tag);
  const uint64_t wr = coll::make_wr(im.slot_of(op), op.gen, is_send, 0);
  const MemoryRegion* mr = mr_for(op, buf, len);
  Result<size_t> k = size_t{0};
  if (is_send) {
    SendRequest r{buf, len, t, wr, mr};
    k = im.group.endpoint(peer).post_send({&r, 1});
  } else {
    RecvRequest r{buf, len, t, wr, mr};
    k = peer < 0 ? im.group.transport().post_recv_any({&r, 1})
                 : im.group.endpoint(peer).post_recv({&r, 1});
  }
  if (!k.ok()) return im.faults.post_error(k.status(), peer, im.where(op));
  if (*k == 1) im.faults.count_post(peer, is_send);
  return *k == 1;
}

const MemoryRegion* coll::Poster::mr_for(const Task& op, const void* p, size_t len) {
  if (!im.needs_mr) return nullptr;
  for (const coll::RegBuf* b : {&op.scratch, &op.workbuf, &op.fusion}) {
    if (b->contains(p, len)) return b->mr();
  }
  if (im.dev_stage && im.dev_stage_mr.contains(p, len)) return &im.dev_stage_mr;
  for (auto& [key, mr] : im.user_mrs) {
    if (mr.contains(p, len)) return &mr;
  }
  if (im.user_mrs.size() == kMaxUserMrs) {
    bool busy =
        std::any_of(im.ops.begin(), im.ops.end(), [&](auto& o) { return o.active && &o != &op; });
    if (busy) return nullptr;  // the driver rejects the request; reported with its reason
    im.user_mrs.clear();
  }
  auto mr = im.group.transport().register_memory(const_cast<void*>(p), len,
                                                 op.device ? MemKind::kCudaDevice : MemKind::kHost);
  if (!mr.ok()) return nullptr;
  im.user_mrs.emplace_back(std::make_pair(p, len), std::move(*mr));
  return &im.user_mrs.back().second;
}

Status coll::Poster::headers(Task& op, std::span<const int> to, std::span<const int> from,
                             bool hold) {
  if (!im.check_args) return Status();
  // to[i] / from[i] is the peer of header unit i (-1: none); both sides number them alike.
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] < 0) continue;
    if (hold && op.nheld < op.held.size()) {  // sent by the engine (coll_xchg.cc)
      op.held[op.nheld++] = {to[i], coll::kHdrUnit + static_cast<uint32_t>(i)};
      continue;
    }
    GW_ASSIGN_OR_RETURN(bool took, send(op, to[i], &op.desc, sizeof(op.desc),
                                        coll::kHdrUnit + static_cast<uint32_t>(i)));
    if (!took) return Status(Code::kResourceExhausted, im.where(op) + ": send queue full");
    ++op.hdr_pending;
  }
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] < 0) continue;
    GW_ASSIGN_OR_RETURN(bool took, recv(op, from[i], &op.hdr_in[i], sizeof(coll::Desc),
                                        coll::kHdrUnit + static_cast<uint32_t>(i)));
    if (!took) return Status(Code::kResourceExhausted, im.where(op) + ": receive queue full");
    ++op.hdr_pending;
  }
  return Status();
}

Status coll::Poster::check_desc(const Task& op, int peer, const coll::Desc* d, size_t len) const {
  return coll::check_desc(op.desc, im.rank, im.n, peer, d, len);
}

}  // namespace gw
