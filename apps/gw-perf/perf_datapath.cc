// The timed path: burst posting, waiting and completion accounting. No allocation, no
// logging, no exceptions here; strings are built only once something has failed.
#include <string>

#include "perf_internal.h"
#include "perf_pattern.h"
#include "perf_session.h"

namespace gw::perf {

void Session::begin(const Phase& p) {
  phase_ = p;
  phase_.depth = std::max<uint32_t>(1, std::min(p.depth, depth_));
  phase_.rx_depth = std::max<uint32_t>(1, std::min(p.rx_depth, rx_depth_));
  phase_.slots = std::max<uint32_t>(1, p.slots);
  std::fill(send_busy_.begin(), send_busy_.end(), 0);
  std::fill(recv_busy_.begin(), recv_busy_.end(), 0);
}

Status Session::post_send_one(uint64_t index) {
  Phase& p = phase_;
  uint32_t slot = p.slot(index);
  uint8_t* buf = send_buf_.data() + slot * p.size;
  if (p.check) pattern_fill(buf, p.size, pattern_seed(p.seq, index, p.send_dir));
  SendRequest r{buf, p.size, data_tag(p.seq), kWrDataSend | index, &send_mr_};
  GW_RETURN_IF_ERROR(post_one(r, [this](auto reqs) { return ep_.post_send(reqs); }));
  if (p.check) send_busy_[slot] = 1;
  ++p.send_posted;
  return Status();
}

Status Session::post_recv_one(uint64_t index) {
  Phase& p = phase_;
  uint32_t slot = p.slot(index);
  RecvRequest r{recv_buf_.data() + slot * p.size, p.size, data_tag(p.seq), kWrDataRecv | index,
                &recv_mr_};
  GW_RETURN_IF_ERROR(post_one(r, [this](auto reqs) { return ep_.post_recv(reqs); }));
  if (p.check) recv_busy_[slot] = 1;
  ++p.recv_posted;
  return Status();
}

Status Session::fill() {
  // Echo (lat server): the next receive goes first, as perftest's does, so that it is posted
  // (and advertised) before the answer that lets the peer send again.
  Phase& p = phase_;
  if (p.echo && p.depth == 1 && p.rx_depth == 1) {  // the latency test: one at a time
    if (p.recv_posted == p.recv_done && p.recv_posted < p.recv_total)
      GW_RETURN_IF_ERROR(post_recv_one(p.recv_posted));
    if (p.send_posted == p.send_done && p.send_posted < std::min(p.send_total, p.recv_done))
      GW_RETURN_IF_ERROR(post_send_one(p.send_posted));
    return Status();
  }
  if (p.echo) {
    GW_RETURN_IF_ERROR(fill_recvs());
    return fill_sends();
  }
  GW_RETURN_IF_ERROR(fill_sends());
  return fill_recvs();
}

Status Session::fill_sends() {
  Phase& p = phase_;
  const uint64_t tag = data_tag(p.seq);
  // Echo: answer message i only once it has arrived.
  const uint64_t send_limit = p.echo ? std::min(p.send_total, p.recv_done) : p.send_total;
  while (p.send_posted < send_limit) {
    size_t k = 0;
    for (; k < sreq_.size(); ++k) {
      uint64_t i = p.send_posted + k;
      if (i >= send_limit || i - p.send_done >= p.depth) break;
      uint32_t slot = p.slot(i);
      uint8_t* buf = send_buf_.data() + slot * p.size;
      if (p.check) {
        if (send_busy_[slot]) break;
        send_busy_[slot] = 1;
        pattern_fill(buf, p.size, pattern_seed(p.seq, i, p.send_dir));
      }
      sreq_[k] = SendRequest{buf, p.size, tag, kWrDataSend | i, &send_mr_};
    }
    if (k == 0) break;
    GW_ASSIGN_OR_RETURN(size_t n, ep_.post_send({sreq_.data(), k}));
    if (p.check) {
      for (size_t j = n; j < k; ++j) send_busy_[p.slot(p.send_posted + j)] = 0;
    }
    p.send_posted += n;
    if (n < k) break;  // queue full: more after the next completions
  }
  return Status();
}

Status Session::fill_recvs() {
  Phase& p = phase_;
  const uint64_t tag = data_tag(p.seq);
  while (p.recv_posted < p.recv_total) {
    size_t k = 0;
    for (; k < rreq_.size(); ++k) {
      uint64_t i = p.recv_posted + k;
      if (i >= p.recv_total || i - p.recv_done >= p.rx_depth) break;
      uint32_t slot = p.slot(i);
      if (p.check) {
        if (recv_busy_[slot]) break;
        recv_busy_[slot] = 1;
      }
      rreq_[k] =
          RecvRequest{recv_buf_.data() + slot * p.size, p.size, tag, kWrDataRecv | i, &recv_mr_};
    }
    if (k == 0) break;
    GW_ASSIGN_OR_RETURN(size_t n, ep_.post_recv({rreq_.data(), k}));
    if (p.check) {
      for (size_t j = n; j < k; ++j) recv_busy_[p.slot(p.recv_posted + j)] = 0;
    }
    p.recv_posted += n;
    if (n < k) break;
  }
  return Status();
}

Status Session::pump() {
  auto r = busy_ ? cq_.wait(comps_, timeout_, Nanos::max()) : cq_.wait(comps_, timeout_);
  if (!r.ok()) {
    const Phase& p = phase_;
    return r.status().with_context(
        "gw-perf rank " + std::to_string(rank_) + ": waiting on " + ep_.peer_name() + " (phase " +
        std::to_string(p.seq) + ", " + std::to_string(p.size) + " B, sent " +
        std::to_string(p.send_done) + "/" + std::to_string(p.send_total) + ", received " +
        std::to_string(p.recv_done) + "/" + std::to_string(p.recv_total) +
        "); is the peer alive? a slower link needs a larger --timeout");
  }
  // One timestamp per batch: the messages of a batch arrived between the last poll and now.
  const uint64_t now = phase_.recv_times != nullptr ? now_ns() : 0;
  for (size_t i = 0; i < *r; ++i) {
    const Completion& c = comps_[i];
    if (c.op == Op::kEndpointError || c.code != Code::kOk) {
      if (!closing_) return fail(c, c.op == Op::kSend ? "send failed" : "receive failed");
      peer_gone_ = true;
      ctrl_send_pending_ = false;
      continue;
    }
    const uint64_t index = c.wr_id & kWrIndexMask;
    switch (c.wr_id & ~kWrIndexMask) {
      case kWrCtrlSend:
        ctrl_send_pending_ = false;
        break;
      case kWrCtrlRecv:
        if (ctrl_arrived_) {
          return Status(Code::kProtocolError, "gw-perf: two control messages from " +
                                                  ep_.peer_name() + " without an answer");
        }
        ctrl_in_ = ctrl_buf_[1];
        ctrl_arrived_ = true;
        if (ctrl_in_.type == CtrlType::kQuit || ctrl_in_.type == CtrlType::kBye) {
          closing_ = true;  // nothing more will come
        } else {
          GW_RETURN_IF_ERROR(post_ctrl_recv());
        }
        break;
      case kWrDataSend:
        ++phase_.send_done;
        if (phase_.check) send_busy_[phase_.slot(index)] = 0;
        break;
      case kWrDataRecv: {
        Phase& p = phase_;
        uint32_t slot = p.slot(index);
        if (c.len != p.size) {
          p.errors += p.size > 0 ? p.size : 1;
        } else if (p.check) {
          p.errors += pattern_errors(recv_buf_.data() + slot * p.size, p.size,
                                     pattern_seed(p.seq, index, p.recv_dir));
        }
        if (p.check) recv_busy_[slot] = 0;
        if (p.recv_times != nullptr) p.recv_times[p.recv_done] = now;
        ++p.recv_done;
        break;
      }
    }
  }
  if (phase_.auto_post) GW_RETURN_IF_ERROR(fill());
  return Status();
}

}  // namespace gw::perf
