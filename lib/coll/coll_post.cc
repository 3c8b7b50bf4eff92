// Posting a collective's requests: one at a time, or a burst of one step's requests to one
// peer in a single post call (one writev on tcp, one doorbell on rdma, one burst on dpdk).
#include <string>

#include "coll_impl.h"

namespace gw {
namespace {

constexpr uint64_t kTagMagic = 0xC0;
constexpr uint64_t kP2pTagMagic = 0xC1;  // point-to-point: the caller's 32-bit tag

}  // namespace

SendRequest Communicator::Impl::send_req(coll::Task& op, const void* buf, size_t len, uint32_t unit,
                                         uint32_t tag_unit) {
  return SendRequest{buf, len,
                     coll::make_tag(kTagMagic, epoch, op.seq, tag_unit == ~0u ? unit : tag_unit),
                     coll::make_wr(slot_of(op), op.gen, true, unit), mr_for(op, buf, len)};
}

RecvRequest Communicator::Impl::recv_req(coll::Task& op, void* buf, size_t len, uint32_t unit,
                                         uint32_t tag_unit) {
  return RecvRequest{buf, len,
                     coll::make_tag(kTagMagic, epoch, op.seq, tag_unit == ~0u ? unit : tag_unit),
                     coll::make_wr(slot_of(op), op.gen, false, unit), mr_for(op, buf, len)};
}

Result<size_t> Communicator::Impl::post_sends(coll::Task& op, int peer,
                                              std::span<const SendRequest> reqs) {
  auto k = group.endpoint(peer).post_send(reqs);
  if (!k.ok()) {
    return post_error(k.status(), peer, where(op) + ": send to rank " + std::to_string(peer));
  }
  for (size_t i = 0; i < *k; ++i) count_post(peer, true);
  return *k;
}

Result<size_t> Communicator::Impl::post_recvs(coll::Task& op, int peer,
                                              std::span<const RecvRequest> reqs) {
  auto k = group.endpoint(peer).post_recv(reqs);
  if (!k.ok()) {
    return post_error(k.status(), peer, where(op) + ": receive from rank " + std::to_string(peer));
  }
  for (size_t i = 0; i < *k; ++i) count_post(peer, false);
  return *k;
}

Result<bool> Communicator::Impl::send(coll::Task& op, int peer, const void* buf, size_t len,
                                      uint32_t unit, uint32_t tag_unit) {
  const SendRequest r = send_req(op, buf, len, unit, tag_unit);
  GW_ASSIGN_OR_RETURN(size_t k, post_sends(op, peer, {&r, 1}));
  return k == 1;
}

bool Communicator::Impl::held_header(coll::Task& op, int peer, SendRequest* r, int* idx) {
  for (uint32_t i = 0; i < op.nheld; ++i) {
    if (op.held[i].peer != peer) continue;
    *r = send_req(op, &op.desc, sizeof(op.desc), op.held[i].unit);
    *idx = static_cast<int>(i);
    return true;
  }
  *idx = -1;
  return false;
}

size_t Communicator::Impl::took_held(coll::Task& op, int idx, size_t took) {
  if (idx < 0 || took == 0) return took;
  ++op.hdr_pending;
  op.held[static_cast<size_t>(idx)] = op.held[--op.nheld];
  return took - 1;
}

Result<bool> Communicator::Impl::send_with_held(coll::Task& op, int peer, const void* buf,
                                                size_t len, uint32_t unit, uint32_t tag_unit) {
  SendRequest r[2];
  int idx;
  if (!held_header(op, peer, &r[0], &idx)) return send(op, peer, buf, len, unit, tag_unit);
  r[1] = send_req(op, buf, len, unit, tag_unit);
  GW_ASSIGN_OR_RETURN(size_t took, post_sends(op, peer, r));
  return took_held(op, idx, took) == 1;
}

Result<bool> Communicator::Impl::send_held(coll::Task& op) {
  while (op.nheld > 0) {
    const coll::Task::HeldHdr h = op.held[op.nheld - 1];
    GW_ASSIGN_OR_RETURN(bool took, send(op, h.peer, &op.desc, sizeof(op.desc), h.unit));
    if (!took) return false;
    ++op.hdr_pending;
    --op.nheld;
  }
  return true;
}

Result<bool> Communicator::Impl::recv(coll::Task& op, int peer, void* buf, size_t len,
                                      uint32_t unit, uint32_t tag_unit) {
  const RecvRequest r = recv_req(op, buf, len, unit, tag_unit);
  GW_ASSIGN_OR_RETURN(size_t k, post_recvs(op, peer, {&r, 1}));
  return k == 1;
}

Result<bool> Communicator::Impl::post_p2p(coll::Task& op, int peer, bool is_send, void* buf,
                                          size_t len, uint32_t tag) {
  const uint64_t t = coll::make_tag(kP2pTagMagic, epoch, 0, tag);
  const uint64_t wr = coll::make_wr(slot_of(op), op.gen, is_send, 0);
  const MemoryRegion* mr = mr_for(op, buf, len);
  Result<size_t> k = size_t{0};
  if (is_send) {
    SendRequest r{buf, len, t, wr, mr};
    k = group.endpoint(peer).post_send({&r, 1});
  } else {
    RecvRequest r{buf, len, t, wr, mr};
    k = peer < 0 ? group.transport().post_recv_any({&r, 1})
                 : group.endpoint(peer).post_recv({&r, 1});
  }
  if (!k.ok()) return post_error(k.status(), peer, where(op));
  if (*k == 1) count_post(peer, is_send);
  return *k == 1;
}

}  // namespace gw
