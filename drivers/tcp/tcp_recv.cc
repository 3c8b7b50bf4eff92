// TcpEndpoint's receive side: bulk and direct reads, chunk headers, message matching in send
// order, unexpected messages. No allocation except the bounded buffers of unexpected messages.
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {
namespace {
constexpr size_t kDirectMin = 4096;  // payload left at least this big is read in place
}  // namespace

// Reads up to n bytes; false when the stream has nothing more now (or failed).
bool TcpEndpoint::read_some(Stream& s, uint8_t* dst, size_t n, size_t* got) {
  ssize_t r;
  if (s.ssl) {
    // A short TLS read ends a record, not the socket's data: read until it wants more.
    std::string why;
    switch (tls_read(s.ssl.get(), dst, n, got, &why)) {
      case TlsIo::kOk:
        live_.heard();
        t_->counters_.bytes_received += *got;
        return true;
      case TlsIo::kWantRead:
      case TlsIo::kWantWrite:
        s.readable = false;
        return false;
      case TlsIo::kError:
        fail(stream_error(s, ("failed TLS (" + why + ")").c_str(), 0));
        return false;
      case TlsIo::kClosed:
        break;
    }
    r = 0;
  } else {
    r = ::recv(s.fd.get(), dst, n, MSG_DONTWAIT);
  }
  if (r > 0) {
    *got = static_cast<size_t>(r);
    // A short read drained the socket; edge-triggered epoll reports the next arrival, so
    // skip the recv() that would only say EAGAIN -- unless the peer's FIN came with the data
    // (EPOLLRDHUP), which no later edge would report.
    if (static_cast<size_t>(r) < n && !s.hup) s.readable = false;
    live_.heard();
    t_->counters_.bytes_received += static_cast<uint64_t>(r);
    return true;
  }
  if (r == 0) {
    // A FIN between frames is how a peer that finished leaves: once every stream has one,
    // what it sent stays receivable. Within a frame, the message is cut short.
    const bool between = s.rx == Stream::Rx::kHeader && s.stage_end == s.stage_begin;
    s.eof = between;
    s.readable = false;
    if (links()) {
      links_eof(s, between);
      return false;
    }
    bool all = between;
    for (auto& o : streams_) all &= o->eof;
    if (all || !between) fail(stream_error(s, "closed the connection", 0), all);
  } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
    s.readable = false;
  } else if (errno != EINTR) {
    // Several links: a link's error, or a stream we gave up whose far end the peer closed.
    if (links() && (link_error(errno) || s.state != Stream::Link::kUp || fresh(s))) {
      lose(s, errno_text(errno));
      links_eof(s, true);
    } else {
      fail(stream_error(s, "reset the connection", errno));
    }
  }
  return false;
}

// read()'s steps, one call site each: always inlined, so read() stays one loop.
// A whole header is staged: act on it. @return false: stop reading `s` for now.
[[gnu::always_inline]] inline bool TcpEndpoint::take_header(Stream& s) {
  std::memcpy(&s.hdr, s.stage.get() + s.stage_begin, sizeof(FrameHeader));
  s.stage_begin += sizeof(FrameHeader);
  if (const char* why = check_header(s.hdr, t_->opts().max_message)) {
    ++t_->counters_.protocol_errors;
    fail(Status(Code::kProtocolError, "tcp: malformed frame from " + peer_name_ + " (" + remote_ +
                                          "): " + why + "; connection dropped"));
    return false;
  }
  if (s.hdr.type == static_cast<uint8_t>(FrameType::kHeartbeat)) {
    live_.peer_says((s.hdr.flags & kHeartbeatLive) != 0);
    ++t_->counters_.heartbeats_received;
    s.big = false;
    s.rx_bytes += sizeof(FrameHeader);
    return true;
  }
  if (s.hdr.type == static_cast<uint8_t>(FrameType::kGiveUp)) {
    s.big = false;
    s.rx_bytes += sizeof(FrameHeader);
    // It sends no more on it either: what it held there comes again on the others.
    if (Stream* o = links() ? by_id(static_cast<uint32_t>(s.hdr.offset)) : nullptr) {
      retire(*o, "the peer gave it up", false);
      if (o != &s) close_rx(*o);
    }
    return true;
  }
  if (s.hdr.type == static_cast<uint8_t>(FrameType::kAck)) {
    s.big = false;
    s.rx_bytes += sizeof(FrameHeader);
    on_ack(s.hdr);
    return true;
  }
  if (s.hdr.type != static_cast<uint8_t>(FrameType::kData)) {
    ++t_->counters_.protocol_errors;
    fail(Status(Code::kProtocolError,
                "tcp: unexpected hello from " + peer_name_ + " on a connected stream"));
    return false;
  }
  // A chunk that does not fit the stage takes two reads either way; reading its
  // successor's header alone then saves copying up to kStageSize of payload. A smaller
  // one is cheaper in one bulk read and a copy (16 KiB ping-pong: 0.78x when read alone).
  s.big = sizeof(FrameHeader) + s.hdr.chunk_len > kStageSize;
  // Sent again from a stream given up: taken unless it was read there (tcp_links.cc).
  if ((s.hdr.flags & kResent) && !take_resent(s.hdr)) {
    s.rx = Stream::Rx::kStalled;  // header read, chunk not begun
    discard_chunk(s);
    return true;
  }
  return start_chunk(s);
}

// `have` (< a header) bytes staged: read more. @return false: stop reading `s` for now.
[[gnu::always_inline]] inline bool TcpEndpoint::read_header(Stream& s, size_t have, int* reads) {
  if (!s.readable || (*reads)++ >= kMaxReadsPerPoll) return false;
  if (s.stage_begin > 0) {  // keep the partial header at the front
    std::memmove(s.stage.get(), s.stage.get() + s.stage_begin, have);
    s.stage_begin = 0;
    s.stage_end = have;
  }
  size_t got, room = kStageSize - s.stage_end;
  if (s.big) room = sizeof(FrameHeader) - have;  // have < sizeof(FrameHeader) here
  if (!read_some(s, s.stage.get() + s.stage_end, room, &got)) return false;
  s.stage_end += got;
  return true;
}

// Payload: first whatever the bulk read already brought (`have`), then straight into place.
// @return false: stop reading `s` for now.
[[gnu::always_inline]] inline bool TcpEndpoint::read_payload(Stream& s, size_t have, int* reads) {
  if (s.rx_staged && s.chunk_left > 0) {
    if (!read_staged(s, have, reads)) return false;
  } else if (have > 0) {
    size_t take = std::min<uint64_t>(have, s.chunk_left);
    if (s.dst) std::memcpy(s.dst, s.stage.get() + s.stage_begin, take);
    if (s.dst) s.dst += take;
    s.stage_begin += take;
    s.chunk_left -= take;
  } else if (s.chunk_left > 0) {
    if (!s.readable || (*reads)++ >= kMaxReadsPerPoll) return false;
    size_t got;
    if (s.chunk_left >= kDirectMin) {
      uint8_t* to = s.dst ? s.dst : t_->drain_.get();
      size_t n = s.dst ? s.chunk_left : std::min(s.chunk_left, TcpTransport::kDrainSize);
      if (!read_some(s, to, n, &got)) return false;
      if (s.dst) s.dst += got;
      s.chunk_left -= got;
    } else {
      s.stage_begin = s.stage_end = 0;
      if (!read_some(s, s.stage.get(), kStageSize, &got)) return false;
      s.stage_end = got;
    }
  }
  return true;
}

void TcpEndpoint::read(Stream& s) {
  int reads = 0;
  while (!failed()) {
    if (s.rx == Stream::Rx::kStalled) {
      if (!start_chunk(s)) return;
      continue;
    }
    size_t have = s.stage_end - s.stage_begin;
    if (s.rx == Stream::Rx::kHeader) {
      if (have >= sizeof(FrameHeader) ? !take_header(s) : !read_header(s, have, &reads)) return;
      continue;
    }
    if (!read_payload(s, have, &reads)) return;
    if (s.chunk_left == 0) end_chunk(s);
  }
}

// The chunk header in s.hdr is valid: find its message. False = stalled (or failed).
bool TcpEndpoint::start_chunk(Stream& s) {
  const FrameHeader& h = s.hdr;
  int m = -1;
  if (h.seq < next_match_) {
    m = core_.find_active(h.seq);
    if (m < 0 || core_.msg(m).tag != h.tag || core_.msg(m).len != h.msg_len) {
      ++t_->counters_.protocol_errors;
      fail(Status(Code::kProtocolError, "tcp: chunk of message " + std::to_string(h.seq) +
                                            " from " + peer_name_ +
                                            " does not belong to any message in flight"));
      return false;
    }
  } else if (h.seq == next_match_) {
    m = match_new(h);
  }
  if (m < 0) {
    if (s.rx != Stream::Rx::kStalled) ++t_->counters_.rx_stalls;
    s.rx = Stream::Rx::kStalled;
    return false;
  }
  s.rx = Stream::Rx::kPayload;
  s.msg = m;
  s.chunk_left = h.chunk_len;
  s.dst = core_.msg(m).base ? core_.msg(m).base + h.offset : nullptr;
  s.rx_staged = s.dst && ext_[m].device;
  if (s.chunk_left == 0) end_chunk(s);
  return true;
}

int TcpEndpoint::match_new(const FrameHeader& h) {
  const int m = core_.begin(h.seq, h.tag, h.msg_len);
  if (m < 0) return -1;
  const core::InMsg& im = core_.msg(m);
  MsgExt& x = ext_[m];
  x = MsgExt{};
  if (im.dest == core::Dest::kUser && h.msg_len > 0 && t_->is_device(im.req.buf, im.req.mr)) {
    // post_recv made the staging pool; an any-source receive makes it here.
    if (auto pool = t_->rx_pool(); pool.ok()) {
      x.device = true;
    } else {
      t_->log_->warn("tcp: dropped a message from {}: {}", peer_name_, pool.status().to_string());
      core_.reject(m, Code::kNotSupported);
    }
  }
  ++next_match_;
  return m;
}

void TcpEndpoint::discard_chunk(Stream& s) {
  if (s.rx_slot >= 0) t_->rx_pool_now()->release(s.rx_slot);
  s.rx_slot = -1;
  s.rx_staged = false;
  if (s.rx == Stream::Rx::kHeader) return;
  if (s.rx == Stream::Rx::kStalled) s.chunk_left = s.hdr.chunk_len;
  s.rx = Stream::Rx::kPayload;
  s.msg = -1;
  s.dst = nullptr;
  if (s.chunk_left == 0) end_chunk(s);
}

void TcpEndpoint::end_chunk(Stream& s) {
  const int m = s.msg;
  s.rx_bytes += sizeof(FrameHeader) + s.hdr.chunk_len;
  s.rx_ackable = s.rx_bytes;
  if (m < 0) {  // discarded: read before on the stream it was first sent on (tcp_links.cc)
    s.rx = Stream::Rx::kHeader;
    return;
  }
  MsgExt& x = ext_[m];
  x.received += s.hdr.chunk_len;
  s.rx = Stream::Rx::kHeader;
  s.msg = -1;
  s.rx_staged = false;
  if (x.received == core_.msg(m).len && x.copies == 0) core_.finish(m);
}

bool TcpEndpoint::copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) {
  if (n == 0 || !t_->is_device(r.buf, r.mr)) return core::RecvHooks::copy_unexpected(r, src, n);
  // Buffered before its device receive was posted: one synchronous copy (rare path).
  auto pool = t_->rx_pool();
  Status st = pool.ok() ? (*pool)->copy_in_sync(r.buf, src, n) : pool.status();
  if (!st.ok()) fail(st.with_context("tcp: message from " + peer_name_));
  return st.ok();
}

}  // namespace gw::drv::tcp
