/// @file rdma_lanes.h
/// An endpoint's queue pairs ("lanes", rdma.qps_per_conn) and their send chains. Work
/// requests are staged into one chain per lane and posted with one ibv_post_send per lane per
/// flush (rxe and mlx5 both pay per call: a system call on rxe, a doorbell on hardware). Only
/// every kSignalEvery-th request, and those that must be (a WRITE with immediate completes a
/// send), is signalled; a signalled completion retires every request posted before it on that
/// lane, which frees send-queue room and transmit buffers.
/// Thread-safety: none; a part of its RdmaEndpoint.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gw_slots.h"
#include "rdma_device.h"

namespace gw::drv::rdma {

class RdmaEndpoint;

class Lanes {
 public:
  static constexpr uint32_t kStageMax = 32;  // work requests per ibv_post_send
  static constexpr uint32_t kSignalEvery = 16;

  explicit Lanes(RdmaEndpoint& ep) : ep_(ep) {}
  void add(QpPtr qp) { lanes_.push_back(Lane{std::move(qp)}); }
  /// Chains of kStageMax, room for `sq_depth` send work requests per lane.
  void init(uint32_t sq_depth);
  void keep(size_t n) { lanes_.resize(std::min(lanes_.size(), n)); }  // the rest destroyed
  void clear() { lanes_.clear(); }
  size_t size() const { return lanes_.size(); }
  bool empty() const { return lanes_.empty(); }
  ibv_qp* qp(size_t l) const { return lanes_[l].qp.get(); }
  bool room(uint32_t l) const { return lanes_[l].sq_used < sq_depth_; }

  /// Adds `wr` (with `sge`) to lane `l`'s chain; `msg`: it uses a transmit buffer.
  void stage(uint32_t l, const ibv_send_wr& wr, const ibv_sge& sge, bool msg, bool must_signal) {
    ibv_send_wr& w = next_wr(l, sge, msg, must_signal);
    ibv_sge* s = w.sg_list;
    const unsigned flags = w.send_flags;
    w = wr;
    w.sg_list = s;
    w.next = nullptr;
    w.send_flags |= flags;
  }
  /// stage() in place: the next work request of lane `l` with its sge, chaining and signal
  /// flag set; the caller fills in the rest (fields it leaves are stale). On every send's path.
  [[gnu::always_inline]] ibv_send_wr& next_wr(uint32_t l, const ibv_sge& sge, bool msg,
                                              bool must_signal) {
    Lane& lane = lanes_[l];
    if (lane.staged == kStageMax) post(l);
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
    if (must_signal || lane.unsignaled >= kSignalEvery || lane.sq_used >= sq_depth_) {
      w.send_flags = IBV_SEND_SIGNALED;
      lane.sigs.push(Sig{lane.unsignaled, lane.unsignaled_msgs});
      lane.unsignaled = lane.unsignaled_msgs = 0;
    }
    return w;
  }
  /// Posts lane `l`'s chain (one call); a failure fails the endpoint.
  void post(uint32_t l);
  /// A signalled send completion on lane `l`: retires it and the unsignalled requests before
  /// it. @return the transmit buffers they used.
  uint32_t retire(uint32_t l) {
    Lane& lane = lanes_[l];
    if (lane.sigs.empty()) return 0;
    const Sig s = lane.sigs.front();
    lane.sigs.pop();
    lane.sq_used -= std::min(lane.sq_used, s.wrs);
    return s.msgs;
  }

 private:
  struct Sig {
    uint32_t wrs = 0, msgs = 0;  // what one signalled completion retires
  };
  struct Lane {
    QpPtr qp;
    uint32_t sq_used = 0;  // send work requests staged or posted, not retired
    uint32_t unsignaled = 0, unsignaled_msgs = 0;
    Ring<Sig> sigs;  // signalled requests in flight, in posting order
    std::vector<ibv_send_wr> wrs;
    std::vector<ibv_sge> sges;
    uint32_t staged = 0;
  };

  RdmaEndpoint& ep_;
  std::vector<Lane> lanes_;  // [0]: SENDs, credits and stripe 0; [1..]: stripes only
  uint32_t sq_depth_ = 0;
};

}  // namespace gw::drv::rdma
