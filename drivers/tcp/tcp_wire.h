/// @file tcp_wire.h
/// The TCP driver's wire format. Every frame starts with a 64-byte FrameHeader (little-endian).
/// A message is sent as one or more DATA chunks (striped across the streams of an endpoint);
/// chunks carry the message's sequence number so the receiver matches messages in send order
/// whatever stream they arrive on. A dialled socket first sends one HELLO frame.
///
/// Address payload (what Transport::address() carries after the 9-byte Address header):
///   family (1 byte: 4 or 6), port (2 bytes, big-endian), IP (4 or 16 bytes, network order).
#pragma once

#include <bit>
#include <cstdint>

namespace gw::drv::tcp {

static_assert(std::endian::native == std::endian::little, "wire format assumes little-endian");

inline constexpr uint32_t kMagic = 0x31575747;  // "GWW1"
inline constexpr uint8_t kVersion = 3;          // 3: heartbeat frames (kHeartbeat)
inline constexpr uint32_t kMaxStreams = 64;
inline constexpr uint64_t kMaxChunk = uint64_t{1} << 30;

enum class FrameType : uint8_t {
  kData = 1,   ///< tag, msg_len, seq, offset, chunk_len describe one chunk of a message
  kHello = 2,  ///< tag = connection key, msg_len = stream count, offset = stream index
  /// No payload; flags: kHeartbeatLive while the sender's progress thread runs (it then
  /// sends one every tcp.heartbeat_ms, and its silence means its process is stopped).
  kHeartbeat = 3,
  /// tcp.ifaces (several links): the sender read `seq` bytes (whole frames) of its stream
  /// `offset`; the chunks they hold complete (until then they may be sent again). `msg_len`:
  /// the sender's next message to match (chunks of earlier ones may go on any stream).
  kAck = 4,
  /// tcp.ifaces: the sender sends no more on its stream `offset` (a link it found dead, or
  /// tcp.link_fault_ms); the receiver gives it up too. Advice only: nothing waits for it.
  kGiveUp = 5,
};

inline constexpr uint16_t kHeartbeatLive = 1;

struct FrameHeader {
  uint32_t magic;
  uint8_t version;
  uint8_t type;
  uint16_t flags;
  uint32_t chunk_len;  ///< payload bytes that follow this header
  uint32_t reserved;
  uint64_t tag;
  uint64_t msg_len;
  uint64_t seq;
  uint64_t offset;
  // Zero, ignored. With a 48-byte header (version 1) the payload started 48 bytes into a
  // cache line of the kernel's socket buffer and the sender's copy into it was slow (64 KiB
  // ping-pong 22.0 us; 15.3 us with 64 bytes, docs/bench-tcp.md).
  uint64_t pad[2];
};
static_assert(sizeof(FrameHeader) == 64);

inline FrameHeader make_data_header(uint64_t tag, uint64_t msg_len, uint64_t seq, uint64_t offset,
                                    uint32_t chunk_len) {
  return FrameHeader{
      kMagic, kVersion, static_cast<uint8_t>(FrameType::kData), 0, chunk_len, 0, tag, msg_len, seq,
      offset, {}};
}

/// Hello flag: the dialling side runs TLS on this stream (tcp.tls=on); the MACs of the key's
/// challenge cover it, so it cannot be stripped on the way.
inline constexpr uint16_t kHelloTls = 1;

/// Hello flag: several links (tcp.ifaces); `seq` = the link count. With kHelloJoin too the
/// stream joins a connected endpoint (a replacement, or a link that came back); `offset` is
/// then its id (the dialling side's own, never used twice).
inline constexpr uint16_t kHelloLinks = 2;
inline constexpr uint16_t kHelloJoin = 4;

inline FrameHeader make_hello(uint64_t key, uint32_t streams, uint32_t index, uint16_t flags = 0,
                              uint64_t links = 0) {
  return FrameHeader{
      kMagic, kVersion, static_cast<uint8_t>(FrameType::kHello), flags, 0, 0, key, streams, links,
      index,  {}};
}

inline FrameHeader make_ack(uint32_t stream, uint64_t read_bytes, uint64_t next_match) {
  return FrameHeader{
      kMagic, kVersion, static_cast<uint8_t>(FrameType::kAck), 0, 0, 0, 0, next_match, read_bytes,
      stream, {}};
}

inline FrameHeader make_give_up(uint32_t stream) {
  return FrameHeader{kMagic, kVersion, static_cast<uint8_t>(FrameType::kGiveUp), 0, 0, 0, 0, 0, 0,
                     stream, {}};
}

/// Data flag (tcp.ifaces): the chunk was first sent on stream pad[1], ending at its byte pad[0],
/// and that stream was given up; `reserved` names the stream this copy's predecessor was given
/// up on (pad[1] for the first copy). The receiver reads neither stream any more, and takes the
/// chunk unless it read it on pad[1] or read a copy whole.
inline constexpr uint16_t kResent = 1;

inline FrameHeader make_heartbeat(bool live) {
  return FrameHeader{kMagic,
                     kVersion,
                     static_cast<uint8_t>(FrameType::kHeartbeat),
                     static_cast<uint16_t>(live ? kHeartbeatLive : 0),
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     {}};
}

/// Checks a received header before anything is done with it; `max_msg` bounds msg_len so a
/// bogus length is never allocated or trusted. @return nullptr if valid, else the reason.
inline const char* check_header(const FrameHeader& h, uint64_t max_msg) {
  if (h.magic != kMagic) return "bad magic (not a gradwire peer, or the stream is corrupt)";
  if (h.version != kVersion) return "unsupported wire version (peers run different releases)";
  if (h.type == static_cast<uint8_t>(FrameType::kHello)) {
    if (h.flags & kHelloJoin) {  // offset: the stream's id, any
      if (h.chunk_len != 0 || !(h.flags & kHelloLinks)) return "malformed hello (join)";
    } else if (h.chunk_len != 0 || h.msg_len == 0 || h.msg_len > kMaxStreams ||
               h.offset >= h.msg_len) {
      return "malformed hello (stream count or index out of range)";
    }
    if ((h.flags & kHelloLinks) && (h.seq < 2 || h.seq > kMaxStreams))
      return "malformed hello (link count out of range)";
    return nullptr;
  }
  if (h.type == static_cast<uint8_t>(FrameType::kHeartbeat)) {
    if (h.chunk_len != 0 || h.msg_len != 0) return "malformed heartbeat (it carries no payload)";
    return nullptr;
  }
  if (h.type == static_cast<uint8_t>(FrameType::kGiveUp)) {
    if (h.chunk_len != 0 || h.msg_len != 0) return "malformed give-up (it carries no payload)";
    return nullptr;
  }
  if (h.type == static_cast<uint8_t>(FrameType::kAck)) {
    if (h.chunk_len != 0) return "malformed ack (it carries no payload)";
    return nullptr;
  }
  if (h.type != static_cast<uint8_t>(FrameType::kData)) return "unknown frame type";
  if (h.msg_len > max_msg) return "message length beyond tcp.max_message_bytes";
  if (h.chunk_len > kMaxChunk || h.offset > h.msg_len || h.chunk_len > h.msg_len - h.offset)
    return "chunk outside its message";
  if (h.chunk_len == 0 && h.msg_len != 0) return "empty chunk of a non-empty message";
  return nullptr;
}

}  // namespace gw::drv::tcp
