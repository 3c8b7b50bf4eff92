// Session setup and control messages (not timed). The hot path is in perf_datapath.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "perf_internal.h"
#include "perf_session.h"

namespace gw::perf {

namespace {
// Keeps --check buffers (one slot per outstanding message) within reach of a small machine.
constexpr uint64_t kCheckBufferBytes = uint64_t{64} << 20;

const char* ctrl_name(CtrlType t) {
  switch (t) {
    case CtrlType::kHello:
      return "Hello";
    case CtrlType::kPlan:
      return "Plan";
    case CtrlType::kReady:
      return "Ready";
    case CtrlType::kDone:
      return "Done";
    case CtrlType::kQuit:
      return "Quit";
    case CtrlType::kBye:
      return "Bye";
  }
  return "unknown";
}
}  // namespace

Session::Session(Group& group, const Options& opt)
    : group_(group),
      ep_(group.endpoint(1 - group.rank())),
      cq_(group.transport().cq()),
      rank_(group.rank()),
      timeout_(opt.timeout),
      busy_(opt.busy) {}

const TransportProperties& Session::properties() const { return group_.transport().properties(); }

Result<std::unique_ptr<Session>> Session::create_control(Group& group, const Options& opt) {
  if (group.size() != 2) {
    return Status(Code::kInvalidArgument, "gw-perf runs between exactly 2 ranks, got world size " +
                                              std::to_string(group.size()));
  }
  std::unique_ptr<Session> s(new Session(group, opt));
  GW_ASSIGN_OR_RETURN(s->ctrl_mr_, group.transport().register_memory(
                                       s->ctrl_buf_.data(), sizeof(s->ctrl_buf_), MemKind::kHost));
  GW_RETURN_IF_ERROR(s->post_ctrl_recv());
  return s;
}

Result<std::unique_ptr<Session>> Session::create(Group& group, const Options& opt,
                                                 uint64_t max_size, uint32_t depth,
                                                 uint32_t rx_depth, bool check, uint32_t buffers) {
  GW_ASSIGN_OR_RETURN(auto s, create_control(group, opt));
  GW_RETURN_IF_ERROR(s->create_data(max_size, depth, rx_depth, check, buffers));
  return s;
}

Status PageBuffer::assign(size_t n, uint8_t v) {
  const size_t rounded = (std::max<size_t>(n, 1) + 4095) / 4096 * 4096;
  p_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded)));
  n_ = p_ ? n : 0;
  if (!p_) {
    return Status(Code::kResourceExhausted,
                  "gw-perf: cannot allocate " + std::to_string(n) +
                      " bytes of message buffers: use a smaller size, --buffers or --tx-depth");
  }
  std::memset(p_.get(), v, rounded);
  return Status();
}

Status Session::create_data(uint64_t max_size, uint32_t depth, uint32_t rx_depth, bool check,
                            uint32_t buffers) {
  const auto& props = properties();
  if (props.max_message_size != 0 && max_size > props.max_message_size) {
    return Status(Code::kInvalidArgument, "size " + std::to_string(max_size) + " exceeds " +
                                              props.name + "'s max message size " +
                                              std::to_string(props.max_message_size));
  }
  // One send and one receive of each direction are kept for control messages.
  depth_ = std::max<uint32_t>(1, depth);
  // Receives posted further ahead than sends (perftest's rx-depth): a receive is posted, and
  // on rdma advertised, before the send that needs it. --check gives each its own slot.
  rx_depth_ = check ? depth_ : std::max<uint32_t>(1, rx_depth);
  if (props.max_outstanding > 1) {
    depth_ = static_cast<uint32_t>(std::min<uint64_t>(depth_, props.max_outstanding - 1));
    rx_depth_ = static_cast<uint32_t>(std::min<uint64_t>(rx_depth_, props.max_outstanding - 1));
  }
  check_ = check;
  max_size = std::max<uint64_t>(max_size, 1);
  // Without --check every message shares one slot each way, as perftest and iperf3 reuse
  // theirs (--buffers: N slots, an application's footprint); with it each outstanding message
  // has its own slot so it can be verified.
  buffers_ = std::clamp<uint32_t>(buffers, 1, std::max(depth_, rx_depth_));
  buf_bytes_ = check ? std::max(max_size, std::min(max_size * depth_, kCheckBufferBytes))
                     : max_size * buffers_;
  GW_RETURN_IF_ERROR(send_buf_.assign(buf_bytes_, 0));
  GW_RETURN_IF_ERROR(recv_buf_.assign(buf_bytes_, 0));
  send_busy_.assign(depth_, 0);
  recv_busy_.assign(depth_, 0);
  auto& t = group_.transport();
  GW_ASSIGN_OR_RETURN(send_mr_, t.register_memory(send_buf_.data(), buf_bytes_, MemKind::kHost));
  GW_ASSIGN_OR_RETURN(recv_mr_, t.register_memory(recv_buf_.data(), buf_bytes_, MemKind::kHost));
  return Status();
}

uint32_t Session::slots_for(uint64_t size) const {
  if (size == 0) return 1;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(buf_bytes_ / size, 1, check_ ? depth_ : buffers_));
}

Status Session::post_ctrl_recv() {
  RecvRequest r{&ctrl_buf_[1], sizeof(Ctrl), kCtrlTag, kWrCtrlRecv, &ctrl_mr_};
  GW_ASSIGN_OR_RETURN(size_t n, ep_.post_recv({&r, 1}));
  if (n != 1) {
    return Status(Code::kResourceExhausted,
                  "gw-perf: receive queue to " + ep_.peer_name() + " full for a control message");
  }
  return Status();
}

Status Session::flush_ctrl() {
  while (ctrl_send_pending_ && !peer_gone_) GW_RETURN_IF_ERROR(pump());
  return Status();
}

Status Session::send_ctrl(const Ctrl& c) {
  GW_RETURN_IF_ERROR(flush_ctrl());
  if (c.type == CtrlType::kQuit) closing_ = true;
  ctrl_buf_[0] = c;
  SendRequest r{&ctrl_buf_[0], sizeof(Ctrl), kCtrlTag, kWrCtrlSend, &ctrl_mr_};
  GW_RETURN_IF_ERROR(post_one(r, [this](auto reqs) { return ep_.post_send(reqs); }));
  ctrl_send_pending_ = true;
  return Status();
}

Result<Ctrl> Session::recv_ctrl(CtrlType want, CtrlType alt) {
  while (!ctrl_arrived_) {
    if (peer_gone_) {
      return Status(Code::kRemoteError, "gw-perf: " + ep_.peer_name() + " left before its " +
                                            ctrl_name(want) + ": " + ep_.status().to_string());
    }
    GW_RETURN_IF_ERROR(pump());
  }
  ctrl_arrived_ = false;
  const Ctrl c = ctrl_in_;
  if (c.magic != kCtrlMagic || (c.type != want && c.type != alt)) {
    char got[64];
    std::snprintf(got, sizeof(got), "magic 0x%08x type %u", c.magic, static_cast<uint32_t>(c.type));
    return Status(Code::kProtocolError, "gw-perf: expected a " + std::string(ctrl_name(want)) +
                                            " message from " + ep_.peer_name() + ", got " + got +
                                            " (is the peer the same gw-perf version?)");
  }
  return c;
}

Status Session::fail(const Completion& c, const char* what) const {
  Status st = c.op == Op::kEndpointError || c.code != Code::kInvalidArgument
                  ? (c.ep ? c.ep->status() : ep_.status())
                  : Status(c.code, "message of " + std::to_string(c.len) +
                                       " bytes longer than the posted buffer");
  if (st.ok()) st = Status(c.code, "request failed");
  return st.with_context("gw-perf rank " + std::to_string(rank_) + ": " + what + " with " +
                         ep_.peer_name() + " (phase " + std::to_string(phase_.seq) + ", " +
                         std::to_string(phase_.size) + " B)");
}

}  // namespace gw::perf
