// Credits: the credit words and the credit WRITE (rdma_credits.h).
#include "rdma_credits.h"

#include <algorithm>

namespace gw::drv::rdma {

Status Credits::init(ibv_pd* pd, uint32_t recv_depth, const std::string& dev) {
  words_ = std::make_unique<CreditWords>();
  words_->peer_posted = 0;
  words_->my_posted = 0;
  half_ = static_cast<int32_t>(std::max<uint32_t>(1, recv_depth / 2));
  quarter_ = static_cast<int32_t>(std::max<uint32_t>(1, recv_depth / 4));
  return register_buffer(pd, words_.get(), sizeof(CreditWords),
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, dev, &mr_);
}

void Credits::connect(uint32_t peer_depth, uint64_t addr, uint32_t rkey) {
  peer_posted_ = peer_depth;
  words_->peer_posted = peer_depth;
  peer_addr_ = addr;
  peer_rkey_ = rkey;
}

ibv_sge Credits::write(ibv_send_wr* wr) {
  words_->my_posted = posted_;
  wr->num_sge = 1;
  wr->opcode = IBV_WR_RDMA_WRITE;
  wr->wr.rdma.remote_addr = peer_addr_;
  wr->wr.rdma.rkey = peer_rkey_;
  return ibv_sge{reinterpret_cast<uintptr_t>(&words_->my_posted), 4, mr_->lkey};
}

}  // namespace gw::drv::rdma
