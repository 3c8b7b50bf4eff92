/// @file tcp_stream.h
/// One TCP stream of a connection (tcp_transport.h): its socket, its send queue of chunks and
/// its receive state; and an accepted stream waiting for connect() to take it.
#pragma once

#include <cstdint>
#include <memory>

#include "gw_socket.h"
#include "gw_transport.h"
#include "tcp_slots.h"
#include "tcp_tls.h"
#include "tcp_wire.h"

namespace gw::drv::tcp {

class TcpEndpoint;

/// What an epoll event points at.
struct PollItem {
  enum Kind : uint8_t { kListener, kStream, kWake } kind;
};

/// An accepted stream whose HELLO came, waiting for connect() to take it. With tcp.tls=on its
/// TLS handshake runs meanwhile (progress), so a dialling peer's connect() completes as soon
/// as this process drives its transport, whatever connect() it is in.
struct Parked {
  Fd fd;
  FrameHeader hello{};
  SslPtr ssl;
  bool tls_ready = false;
  Clock::time_point tls_until{};  // the handshake, or a join's wait for its endpoint, ends then
};

struct Stream : PollItem {
  Fd fd;
  TcpEndpoint* ep = nullptr;
  bool readable = true;
  bool writable = true;
  bool hup = false;      // the peer closed or errored: read until recv() says so
  bool eof = false;      // the peer's FIN was read between two frames
  bool watched = false;  // in the transport's epoll set (TcpEndpoint::watch)
  // tcp.tls=on: the stream's TLS session (handshake done at set-up); small writes packed.
  SslPtr ssl;
  std::unique_ptr<uint8_t[]> tls_pack;
  // Send side: chunks queued in order; the head may be partly written.
  Ring<Chunk> txq;
  static constexpr size_t kPackBytes = 256;  // frames up to this much go out through `pack`
  uint8_t pack[kPackBytes];
  // Receive side.
  enum class Rx : uint8_t { kHeader, kPayload, kStalled } rx = Rx::kHeader;
  std::unique_ptr<uint8_t[]> stage;  // small frames are read in bulk through here
  size_t stage_begin = 0, stage_end = 0;
  // The last chunk was big: read the next header alone, since a bulk read would bring up to
  // kStageSize of its payload through `stage` (one more copy) instead of straight into place.
  bool big = false;
  FrameHeader hdr{};
  int msg = -1;            // InMsg slot of the chunk being read
  uint8_t* dst = nullptr;  // where the payload goes; null = discard
  uint64_t chunk_left = 0;
  // Device-memory staging (tcp_staging.cc): receive slot being filled, send slots held.
  bool rx_staged = false;  // the payload goes to device memory through a slot
  int rx_slot = -1;
  size_t rx_fill = 0;
  uint8_t* rx_slot_dst = nullptr;  // device address of the slot's first byte
  uint32_t tx_staged = 0;          // send slots held by chunks of this stream
  // Several links (tcp.ifaces, tcp_links.cc). A written chunk stays at the head of txq until
  // the peer says it read it (kAck): only then does its send complete, so what a dead link
  // held can be sent again. kOut: we send no more on it (what it held went to other
  // streams); we read it until the peer's first chunk sent again from it (rx_closed).
  enum class Link : uint8_t { kUp, kOut } state = Link::kUp;
  bool rx_closed = false;
  uint8_t link = 0;         // which of the endpoint's links it runs over
  uint32_t id = 0;          // the endpoint's name for it (a joined stream's is never reused)
  size_t sent = 0;          // chunks at the head of txq written, waiting for their ack
  uint64_t pushed = 0;      // bytes of the frames queued on it so far (a Chunk's `end`)
  uint64_t tx_bytes = 0;    // bytes written
  uint64_t acked = 0;       // bytes the peer read (its kAck)
  uint64_t kacked = 0;      // bytes its kernel acknowledged (SIOCOUTQ): is the link alive?
  uint64_t queued = 0;      // bytes of txq's chunks (written or not) not yet acknowledged
  uint64_t rx_bytes = 0;    // bytes of whole frames read
  uint64_t rx_ackable = 0;  // rx_bytes after the last data frame read: to acknowledge
  uint64_t rx_acked = 0;    // what our last kAck said
  uint64_t max_seq = 0;     // the highest message it carried (it carries them in order)
  uint64_t moved_ns = 0;    // last time `kacked` moved, or it had nothing outstanding
  uint64_t stuck = 0;       // bytes sent, not acknowledged by the kernel at the last check
  bool unwritten() const { return txq.size() > sent; }
};

}  // namespace gw::drv::tcp
