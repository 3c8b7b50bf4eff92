// An endpoint's lanes (rdma_lanes.h).
#include "rdma_lanes.h"

#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void Lanes::init(uint32_t sq_depth) {
  sq_depth_ = sq_depth;
  for (Lane& lane : lanes_) {
    lane.wrs.assign(kStageMax, ibv_send_wr{});
    lane.sges.assign(kStageMax, ibv_sge{});
    lane.sigs.init(sq_depth);
  }
}

void Lanes::post(uint32_t l) {
  Lane& lane = lanes_[l];
  if (lane.staged == 0) return;
  for (uint32_t i = 0; i + 1 < lane.staged; ++i) lane.wrs[i].next = &lane.wrs[i + 1];
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(lane.qp.get(), lane.wrs.data(), &bad);
  lane.staged = 0;
  if (rc != 0) ep_.fail_verbs("ibv_post_send", l, rc);
}

}  // namespace gw::drv::rdma
