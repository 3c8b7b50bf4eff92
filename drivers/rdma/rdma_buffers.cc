// An endpoint's registered receive and transmit buffers (rdma_buffers.h).
#include "rdma_buffers.h"

#include "rdma_options.h"

namespace gw::drv::rdma {

Status RecvBuffers::init(ibv_pd* pd, uint32_t n, size_t slot_bytes, uint32_t ep,
                         const std::string& dev) {
  slot_bytes_ = slot_bytes;
  mem_.reset(new uint8_t[slot_bytes * n]);
  GW_RETURN_IF_ERROR(
      register_buffer(pd, mem_.get(), slot_bytes * n, IBV_ACCESS_LOCAL_WRITE, dev, &mr_));
  // One fixed work request per receive buffer: a repost only links it into the next chain.
  wrs_.assign(n, ibv_recv_wr{});
  sges_.assign(n, ibv_sge{});
  for (uint32_t i = 0; i < n; ++i) {
    sges_[i] =
        ibv_sge{reinterpret_cast<uintptr_t>(at(i)), static_cast<uint32_t>(slot_bytes), mr_->lkey};
    wrs_[i].wr_id = make_wr(WrKind::kRecv, ep, i);
    wrs_[i].sg_list = &sges_[i];
    wrs_[i].num_sge = 1;
  }
  return Status();
}

Status TxRing::init(ibv_pd* pd, uint32_t n, size_t slot_bytes, const std::string& dev) {
  slot_bytes_ = slot_bytes;
  n_ = free_ = n;
  mem_.reset(new uint8_t[slot_bytes * n]);
  return register_buffer(pd, mem_.get(), slot_bytes * n, 0, dev, &mr_);
}

}  // namespace gw::drv::rdma
