/// @file tcp_endpoint_state.h
/// The records a TcpEndpoint keeps (tcp_endpoint.h): send slots, what tcp adds to the core's
/// receive message, joins of streams in progress, links mode's state. Kept apart so the
/// endpoint class reads as its operations.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "gw_auth.h"
#include "tcp_transport.h"

namespace gw::drv::tcp::ep_state {

struct SendSlot {
  SendRequest req;
  uint32_t chunks_left = 0;
  bool used = false;
  bool dev = false;  // device memory (staged)
  uint64_t seq = 0;  // links mode: cut into chunks as streams take them
  uint64_t chunk = 0;
  int eager = -1;      // links mode: its copy in Links::eager (it completed at once)
  bool early = false;  // completed before the peer's ack (a copy is kept, or it is empty)
};
/// What tcp adds to the core's message (same slot numbers).
struct MsgExt {
  bool device = false;  // the receive buffer is device memory (staged)
  uint32_t copies = 0;  // host-to-device copies still in flight
  uint64_t received = 0;
};
/// A join of a stream over `link`, connecting and authenticating without blocking.
struct Joining {
  Fd fd;
  uint32_t link = 0, id = 0;
  uint64_t since = 0;
  std::unique_ptr<auth::Client> client;  // set once connected
  bool verdict = false;                  // the proof went: the verdict is read next
  uint8_t in[auth::kServerHello] = {};
  size_t got = 0;
};
/// Links mode's state (tcp.ifaces): chunks between streams, streams given up and joined.
struct Links {
  // Small messages are copied here and complete at once, as on one link (a send otherwise
  // completes on the peer's ack, which needs the peer's progress).
  std::unique_ptr<uint8_t[]> eager;
  std::vector<int> eager_free;
  std::vector<SockAddr> remotes;
  Ring<int> pend;             // send slots with chunks not yet on a stream, in order
  uint64_t pend_off = 0;      // bytes of pend.front() already on streams
  std::vector<Chunk> resend;  // chunks of a given-up stream, by seq
  std::vector<std::pair<uint32_t, uint64_t>> closed_rx;  // stream id -> bytes we read of it
  std::set<std::pair<uint32_t, uint64_t>> taken;         // chunks sent again that we took
  uint32_t next_id = 0;       // the next stream we join (even: dialling side, odd: other)
  uint64_t alone_ns = 0;      // since when no stream is up (0: one is)
  bool asked = false;         // a fresh stream is needed (need_stream)
  bool ack_owed = false;      // an ack found no room (send_ack): links_poll tries again
  bool peer_closing = false;  // the peer closed a stream between frames (links_eof)
  uint64_t peer_next = 0;     // the peer matched every message below this (its acks say)
  uint64_t next_join_ns = 0;  // the next try at joining streams
  uint64_t fault_ns = 0;      // tcp.link_fault_ms: the last stream taken out on purpose
  std::vector<std::unique_ptr<Joining>> joining;  // joins in progress
};

}  // namespace gw::drv::tcp::ep_state
