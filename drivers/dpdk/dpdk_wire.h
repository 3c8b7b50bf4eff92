/// @file dpdk_wire.h
/// The DPDK driver's wire format: Ethernet / IPv4 / UDP, then a 64-byte gradwire header, then
/// up to one MTU of payload. IPv4 and UDP checksums are valid, so captures decode as UDP.
/// The gradwire header is little-endian (like the TCP driver's); the outer headers are in
/// network order. Sequence numbers count packets per connection (32-bit, serial arithmetic).
///
/// Version 2: an ack (kAck) may carry more selective-ack words as its payload, so a receiver
/// reports every packet it holds in the window, not only the first 64 past the ack.
/// Version 3: kBatch carries several whole small messages in one packet.
/// Version 4: SYN and SYN-ACK carry the authentication of gw_auth.h: a SYN the ClientHello,
/// or once answered the dialler's proof; a SYN-ACK the ServerHello, or once the proof was
/// checked the verdict. The acceptor delivers nothing before the proof passed.
///
/// kProbe (same version): a link taken out is probed on it (dpdk_links.h).
///
/// The Address payload: dpdk_addr.h.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "dpdk_addr.h"
#include "dpdk_links.h"

namespace gw::drv::dpdk {

static_assert(std::endian::native == std::endian::little, "wire format assumes little-endian");

inline constexpr uint32_t kMagic = 0x31445747;  // "GWD1"
inline constexpr uint8_t kVersion = 4;
/// SYN / SYN-ACK payloads (gw_auth.h kClientHello, kMac, kServerHello, kVerdict).
inline constexpr size_t kSynHello = 40, kSynProof = 32, kSynAckHello = 72, kSynAckVerdict = 4;
/// Selective-ack words an ack may carry after its header (with the header's: 4096 packets).
inline constexpr uint32_t kMaxSackWords = 63;

enum class PktType : uint8_t {
  kData = 1,    ///< one segment of message msg_id: [offset, offset + seg_len) of msg_len
  kAck = 2,     ///< ack/sack only, payload: more sack words (uint64 each); also the heartbeat
  kSyn = 3,     ///< tag = connection key, src_conn = dialler's id, wnd = its window; auth
  kSynAck = 4,  ///< tag = key, dst_conn = dialler's id, src_conn = acceptor's id; auth
  kFin = 5,     ///< the sender closed the connection
  kBatch = 6,   ///< msg_len whole messages from msg_id on, each a BatchRec and its bytes
  kProbe = 7,   ///< offset = link index; msg_len 0: is this link alive? 1: the answer
};

/// One message of a kBatch packet, followed by its `len` bytes.
struct __attribute__((packed)) BatchRec {
  uint64_t tag;
  uint32_t len;
  uint32_t reserved;
};
static_assert(sizeof(BatchRec) == 16);

struct __attribute__((packed)) WireHdr {
  uint32_t magic;
  uint8_t version;
  uint8_t type;
  uint16_t seg_len;   ///< payload bytes after this header
  uint32_t dst_conn;  ///< receiver's connection id (index | generation << 16)
  uint32_t src_conn;  ///< sender's connection id
  uint32_t seq;       ///< packet number (kData)
  uint32_t ack;       ///< cumulative: every packet before it was consumed
  /// Bit i: packet ack + i is held by the receiver (bit 0 never is). Word j of an ack's
  /// payload continues it: bit i is packet ack + 64 (j + 1) + i.
  uint64_t sack;
  uint32_t msg_id;  ///< message number (kData)
  uint32_t wnd;     ///< window in packets (the receive buffer holds twice as many)
  uint64_t tag;     ///< message tag (kData) or connection key (kSyn, kSynAck)
  uint64_t msg_len;
  uint64_t offset;
};
static_assert(sizeof(WireHdr) == 64);

inline constexpr size_t kEthLen = 14, kIpLen = 20, kUdpLen = 8;
inline constexpr size_t kHdrsLen = kEthLen + kIpLen + kUdpLen + sizeof(WireHdr);  // 106

/// Serial-number comparison of 32-bit packet/message numbers.
inline int32_t seq_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }
inline bool seq_lt(uint32_t a, uint32_t b) { return seq_diff(a, b) < 0; }

/// Checks the gradwire header of a frame whose outer headers were already checked.
/// `payload` is the number of bytes after the header. @return nullptr or the reason.
inline const char* check_wire(const WireHdr& h, size_t payload, uint64_t max_msg) {
  if (h.magic != kMagic) return "bad magic";
  if (h.version != kVersion) return "unsupported wire version";
  if (h.seg_len != payload) return "segment length disagrees with the UDP length";
  switch (static_cast<PktType>(h.type)) {
    case PktType::kData:
      if (h.msg_len > max_msg) return "message length beyond dpdk.max_message_bytes";
      if (h.offset > h.msg_len || h.seg_len > h.msg_len - h.offset)
        return "segment outside its message";
      if (h.seg_len == 0 && h.msg_len != 0) return "empty segment of a non-empty message";
      return nullptr;
    case PktType::kBatch:  // the records are walked by batch_ok() (dpdk_progress.cc)
      return h.msg_len >= 2 && h.msg_len <= h.seg_len / sizeof(BatchRec) && h.offset == 0
                 ? nullptr
                 : "batch with a bad message count";
    case PktType::kAck:
      return h.seg_len % 8 == 0 && h.seg_len <= kMaxSackWords * 8
                 ? nullptr
                 : "ack with a selective-ack payload that is not whole words or too long";
    case PktType::kSyn:
      return h.seg_len == kSynHello || h.seg_len == kSynProof
                 ? nullptr
                 : "SYN without its authentication block (a peer of another version?)";
    case PktType::kSynAck:
      return h.seg_len == kSynAckHello || h.seg_len == kSynAckVerdict
                 ? nullptr
                 : "SYN-ACK without its authentication block";
    case PktType::kFin:
      return h.seg_len == 0 ? nullptr : "control packet with payload";
    case PktType::kProbe:
      return h.seg_len == 0 && h.offset < kMaxLinks && h.msg_len <= 1 ? nullptr : "bad link probe";
  }
  return "unknown packet type";
}

}  // namespace gw::drv::dpdk
