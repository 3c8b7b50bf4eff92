/// @file rdma_wire.h
/// What RDMA peers exchange. The control connection (TCP, set up through the Address) carries
/// one Hello each way: the queue pair's coordinates and where the peer may write credit
/// updates; then only heartbeats, one byte each (kBeatLive, kBeatQuiet). Over the queue pair, every
/// SEND starts with a MsgHdr. Little-endian hosts only (checked at compile time), as the rest of
/// gradwire's wire formats.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace gw::drv::rdma {

static_assert(std::endian::native == std::endian::little, "wire format is little-endian");

inline constexpr uint32_t kHelloMagic = 0x47574448;  // "HDWG"
inline constexpr uint16_t kWireVersion = 5;          // 5: heartbeats on the control connection
/// Queue pairs one connection may stripe over (rdma.qps_per_conn).
inline constexpr int kMaxQps = 8;

/// Sent once each way on the control connection; the passive side answers the active one.
struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t version = kWireVersion;
  uint16_t lid = 0;
  uint64_t key = 0;  ///< ConnectParams::key: pairs the hello with a connect() call
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t gid[16] = {};
  uint8_t mtu = 0;     ///< enum ibv_mtu of the sender's port
  uint8_t reject = 0;  ///< passive side: nonzero = refused (see reason in the log)
  uint8_t nqps = 1;    ///< queue pairs offered (1..kMaxQps); both sides use the fewer
  uint8_t pad = 0;
  uint32_t recv_depth = 0;   ///< receive buffers the sender posted: the peer's first credits
  uint32_t eager_bytes = 0;  ///< payload capacity of each receive buffer
  uint32_t credit_rkey = 0;  ///< where the peer RDMA-writes its credit counter
  uint64_t credit_addr = 0;
  uint32_t qpn_more[kMaxQps - 1] = {};  ///< QPNs of queue pairs 1.. (data only)
  uint32_t pad2 = 0;
};
static_assert(sizeof(Hello) == 96);

/// Heartbeats (rdma_liveness.cc): while a rank's progress thread runs it sends kBeatLive every
/// rdma.heartbeat_ms on each control connection, and kBeatQuiet once when the thread stops
/// (its silence then means nothing). The NIC acknowledges for a stopped process, the kernel
/// keeps its control connection open: only these say the process still runs.
inline constexpr uint8_t kBeatLive = 'L', kBeatQuiet = 'Q';

enum class MsgType : uint8_t {
  kEager = 1,   ///< header + payload
  kRts = 2,     ///< rendezvous request: tag, len, id = sender's send slot
  kCts = 3,     ///< clear to send: id = send slot, id2 = receiver's slot, addr/rkey of the
                ///< buffer, stripes = queue pairs to spread the data over
  kReject = 4,  ///< the matching receive was too small: id = send slot (message dropped)
  kAdv = 5,     ///< a receive posted ahead: tag, len, addr/rkey, id2 = receiver's slot,
                ///< stripes, id = eager+RTS messages the receiver had matched when posting it
  kWin = 6,     ///< clear to send one window of a message whose receive is staged through host
                ///< memory (CUDA without GPUDirect): id = send slot, id2 = receiver's slot,
                ///< tag = offset in the message, len = window bytes, addr/rkey = a staging
                ///< buffer; one stripe. The windows come in message order, back to back.
};

/// Header of every SEND on the queue pair, except compact eager messages: a SEND with
/// immediate carries an eager message's payload alone, the immediate holding the low 32 bits
/// of its tag; the high 32 bits are those of the last eager or RTS message with a header on
/// the connection (0 at first). One packet less for a payload of exactly the MTU, no header to
/// copy; credits then come by the credit write.
struct MsgHdr {
  uint8_t type = 0;
  uint8_t version = kWireVersion;
  uint16_t stripes = 0;  ///< CTS: stripes (1..queue pairs), each ends with WRITE with immediate
  uint32_t posted = 0;   ///< receives the sender has posted so far (credits, wrapping)
  uint32_t id = 0;
  uint32_t id2 = 0;
  uint64_t tag = 0;
  uint64_t len = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t pad2 = 0;
};
static_assert(sizeof(MsgHdr) == 48);

/// What check_msg needs to know of the send a CTS, reject or window names.
struct SendView {
  bool used = false;
  bool awaiting_cts = false;
  bool windowed = false;
  uint64_t win_next = 0;
  uint64_t len = 0;
};

/// Validate a header message of `payload` bytes after its header. `send` is the send slot h.id
/// names (null when h.id is out of range); `lanes`: queue pairs of the connection.
/// @return null when valid, else what is wrong (the caller fails the endpoint). Pure: fuzzed by
/// tests/fuzz/fuzz_rdma_msgs.cc.
inline const char* check_msg(const MsgHdr& h, size_t payload, uint64_t eager_bytes, size_t lanes,
                             const SendView* send) {
  const auto type = static_cast<MsgType>(h.type);
  if (h.version != kWireVersion) return "unknown version";
  switch (type) {
    case MsgType::kEager:
      return h.len != payload || h.len > eager_bytes ? "eager length mismatch" : nullptr;
    case MsgType::kRts:
      return payload != 0 || h.len == 0 ? "bad rendezvous request" : nullptr;
    case MsgType::kCts:
    case MsgType::kReject:
      if (payload != 0 || !send || !send->used || !send->awaiting_cts)
        return "clear-to-send for a send that is not waiting for one";
      if (type == MsgType::kReject) return nullptr;
      if (h.len < send->len || h.rkey == 0) return "clear-to-send smaller than the message";
      if (h.stripes < 1 || h.stripes > lanes || h.stripes > send->len)
        return "clear-to-send with a stripe count this connection cannot carry";
      return nullptr;
    case MsgType::kWin:
      if (payload != 0 || !send || !send->used || !(send->awaiting_cts || send->windowed))
        return "window for a send that is not waiting for one";
      if (h.tag != (send->windowed ? send->win_next : 0) || h.len == 0 || h.tag > send->len ||
          h.len > send->len - h.tag || h.rkey == 0 || h.stripes != 1)
        return "window out of order or beyond the message";
      return nullptr;
    case MsgType::kAdv:
      if (payload != 0 || h.len == 0 || h.rkey == 0 || h.stripes < 1 || h.stripes > lanes ||
          h.stripes > h.len || h.tag == ~uint64_t{0})
        return "malformed receive advertisement";
      return nullptr;
  }
  return "unknown message type";
}

/// Immediate data of a rendezvous RDMA WRITE: the receiver's slot. A message striped over n
/// queue pairs arrives as n WRITEs with immediate (one per stripe, each on its own queue pair,
/// unordered between them); its receive completes with the last.
inline constexpr uint32_t kImmSlotMask = 0x00FFFFFF;

}  // namespace gw::drv::rdma
