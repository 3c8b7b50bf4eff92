// RdmaEndpoint hot path: work completions, message headers, failing the endpoint.
#include <arpa/inet.h>

#include <cstring>

#include "log.h"
#include "rdma_endpoint.h"

namespace gw::drv::rdma {

void RdmaEndpoint::finish_send(uint32_t s, Code code) {
  SendSlot& slot = sends_[s];
  if (code == Code::kOk) {
    ++counters().msgs_sent;
    counters().bytes_sent += slot.req.len;
  }
  complete(slot.req.wr_id, slot.req.tag, code == Code::kOk ? slot.req.len : 0, Op::kSend, code);
  if (slot.reg) t_->regcache().release(slot.reg);
  slot.reg = nullptr;
  slot.used = false;
  free_sends_.push_back(s);
}

// The opcode of a failed completion is undefined: `what` says whether it was a receive.
Status RdmaEndpoint::wc_error(const ibv_wc& wc, const char* what) const {
  const bool recv = std::strcmp(what, "receive") == 0;
  const char* hint = "";
  if (wc.status == IBV_WC_RETRY_EXC_ERR) hint = "; is the peer alive?";
  if (recv && (wc.status == IBV_WC_LOC_LEN_ERR || wc.status == IBV_WC_LOC_QP_OP_ERR)) {
    hint =
        "; the peer sent more than a receive buffer holds (different rdma.eager_bytes, or "
        "not a gradwire peer)";
  }
  return Status(wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR
                    ? Code::kUnavailable
                    : Code::kRemoteError,
                std::string("rdma: ") + what + (recv ? " from " : " to ") + peer_name_ + " on " +
                    t_->dev().name + " failed: " + ibv_wc_status_str(wc.status) +
                    " (vendor error " + std::to_string(wc.vendor_err) + ")" + hint);
}

Status RdmaEndpoint::protocol_error(const std::string& what) {
  ++counters().protocol_errors;
  return Status(Code::kProtocolError, "rdma: malformed message from " + peer_name_ + ": " + what);
}

void RdmaEndpoint::on_wc(const ibv_wc& wc, WrKind kind, uint32_t idx) {
  if (kind == WrKind::kRecv) {
    on_recv(wc, idx);
    return;
  }
  if (kind == WrKind::kLaneRecv) {
    on_lane_recv(wc, idx);
    return;
  }
  if (kind == WrKind::kStaged) {
    staging_.on_wc(wc, idx);
    return;
  }
  const bool write = kind == WrKind::kWrite || kind == WrKind::kWriteImm;
  const uint32_t lane = write ? idx >> 24 : 0;
  if (write) idx &= kImmSlotMask;
  if (lane < lanes_.size()) tx_.retired(lanes_.retire(lane));
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) {
      const char* what = kind == WrKind::kMsg || kind == WrKind::kZeroCopy ? "SEND"
                         : kind == WrKind::kCredit                         ? "credit WRITE"
                                                                           : "RDMA WRITE";
      fail(wc_error(wc, what));
    }
    return;
  }
  if (kind == WrKind::kWriteImm) rndv_.stripe_written(idx);
  if (kind == WrKind::kZeroCopy && idx < sends_.size() && sends_[idx].used)
    finish_send(idx, Code::kOk);
}

void RdmaEndpoint::on_lane_recv(const ibv_wc& wc, uint32_t lane) {
  if (wc.status != IBV_WC_SUCCESS) {
    if (!failed()) fail(wc_error(wc, "receive"));
    return;
  }
  if (failed()) return;
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
    fail(protocol_error("a SEND on data queue pair " + std::to_string(lane)));
    return;
  }
  if (rndv_.on_write_imm(ntohl(wc.imm_data))) repost_lane(lane);
}

void RdmaEndpoint::on_recv(const ibv_wc& wc, uint32_t slot) {
  if (wc.status != IBV_WC_SUCCESS || failed()) return recv_failed(wc);
  credits_.consumed();  // the peer used one of its credits
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    if (rndv_.on_write_imm(ntohl(wc.imm_data))) rx_.repost(slot);
    return;
  }
  const uint8_t* buf = rx_.at(slot);
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
    if (!on_header_msg(wc, buf, slot)) return;        // held: stays in its buffer
  } else if (wc.byte_len > t_->opts().eager_bytes) {  // compact eager message (rdma_wire.h)
    return compact_too_long(wc.byte_len);
  } else {
    const uint64_t tag = (uint64_t{rx_tag_hi_} << 32) | ntohl(wc.imm_data);
    if (!deliver_eager(tag, buf, wc.byte_len)) {
      MsgHdr h;
      h.type = static_cast<uint8_t>(MsgType::kEager);
      h.tag = tag;
      h.len = wc.byte_len;
      return hold(h, slot, 0);
    }
  }
  if (!failed()) rx_.repost(slot);
}

void RdmaEndpoint::recv_failed(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS && !failed()) fail(wc_error(wc, "receive"));
}

void RdmaEndpoint::compact_too_long(uint32_t len) {
  fail(protocol_error("compact eager message of " + std::to_string(len) +
                      " bytes, more than rdma.eager_bytes"));
}

// A message with a header (rdma_wire.h): validated, then handled; on error the endpoint fails.
bool RdmaEndpoint::on_header_msg(const ibv_wc& wc, const uint8_t* buf, uint32_t slot) {
  MsgHdr h;
  if (wc.byte_len < sizeof h) {
    fail(protocol_error(std::to_string(wc.byte_len) + " bytes, shorter than a header"));
    return true;
  }
  std::memcpy(&h, buf, sizeof h);
  const size_t payload = wc.byte_len - sizeof h;
  SendView view;
  const SendView* send = nullptr;
  if (h.id < sends_.size()) {
    const SendSlot& ss = sends_[h.id];
    view = {ss.used, ss.awaiting_cts, ss.windowed, ss.win_next, ss.req.len};
    send = &view;
  }
  const char* bad = check_msg(h, payload, t_->opts().eager_bytes, lanes_.size(), send);
  if (bad) {
    fail(protocol_error(std::string(bad) + " (type " + std::to_string(h.type) + ", length " +
                        std::to_string(h.len) + ", " + std::to_string(wc.byte_len) + " bytes)"));
    return true;
  }
  credits_.heard(h.posted);
  const auto type = static_cast<MsgType>(h.type);
  if (type == MsgType::kEager || type == MsgType::kRts)
    rx_tag_hi_ = static_cast<uint32_t>(h.tag >> 32);
  if (on_message(h, buf + sizeof h)) return true;
  hold(h, slot, sizeof h);
  return false;
}

void RdmaEndpoint::fail(const Status& st, bool orderly) {
  bool pending = false;
  for (const SendSlot& s : sends_) pending |= s.used;
  for (uint32_t i = 0; i < rndv_.size(); ++i)
    pending |= rndv_.slot(i).used && rndv_.slot(i).has_req;
  if (!core_.set_error(st, orderly, pending)) return;
  for (size_t l = 0; l < lanes_.size(); ++l) {  // first: nothing may land in buffers released
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(lanes_.qp(l), &a, IBV_QP_STATE);
  }
  staging_.reset();
  const Code code = st.code();
  for (uint32_t i = 0; i < sends_.size(); ++i)
    if (sends_[i].used) finish_send(i, code);
  for (uint32_t i = 0; i < rndv_.size(); ++i) {
    ep_state::RndvRecv& rv = rndv_.slot(i);
    if (!rv.used) continue;
    if (rv.has_req) complete(rv.req.wr_id, rv.tag, 0, Op::kRecv, code);
    if (rv.reg) t_->regcache().release(rv.reg);  // before the core frees a pull's buffer
    rv = ep_state::RndvRecv{};
  }
  // Kept: whole eager messages (pulled ones that landed became such), and those held in
  // receive buffers (rx_ lives as long as the endpoint). The rest never will be.
  core_.fail_receives(code, [&](int m) {
    const core::InMsg& im = core_.msg(m);
    return orderly && im.dest == core::Dest::kUnexpected && im.complete && !im.claimed;
  });
  if (!orderly) held_.clear();
  txq_.clear();
  ctrl_ = Fd();  // closing it leaves the epoll set
  core_.report_error();
}

}  // namespace gw::drv::rdma
