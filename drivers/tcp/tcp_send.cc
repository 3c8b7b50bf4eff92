// TcpEndpoint's send side: writev of the queued chunks of each stream (plain or TLS).
// No allocation, no logging above trace.
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {
namespace {
constexpr int kMaxIov = 64;

// flush()'s steps, one call site each (inlined, so flush() stays one loop).
// The iovec of s's unwritten chunks (up to one whose device copy still runs). @return its count.
[[gnu::always_inline]] inline int gather(Stream& s, iovec* iov) {
  int niov = 0;
  for (size_t i = s.sent; i < s.txq.size() && niov + 2 <= kMaxIov; ++i) {
    Chunk& c = s.txq.at(i);
    if (c.dev && !c.payload) break;  // its device-to-host copy is still running
    if (c.done < sizeof(FrameHeader)) {
      iov[niov++] = {reinterpret_cast<uint8_t*>(&c.hdr) + c.done, sizeof(FrameHeader) - c.done};
    }
    size_t pdone = c.done > sizeof(FrameHeader) ? c.done - sizeof(FrameHeader) : 0;
    if (c.hdr.chunk_len > pdone)
      iov[niov++] = {const_cast<uint8_t*>(c.payload) + pdone, c.hdr.chunk_len - pdone};
  }
  return niov;
}

// A plain socket's write of `asked` bytes: send() or sendmsg(). @return as they do.
[[gnu::always_inline]] inline ssize_t send_plain(Stream& s, iovec* iov, int niov, size_t asked) {
  if (asked <= Stream::kPackBytes) {
    // Small frames: one contiguous send() costs the kernel less than importing sendmsg()'s
    // header and iovec array (a copy of at most kPackBytes here).
    uint8_t* p = s.pack;
    for (int i = 0; i < niov; ++i) {
      std::memcpy(p, iov[i].iov_base, iov[i].iov_len);
      p += iov[i].iov_len;
    }
    return ::send(s.fd.get(), s.pack, asked, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  msghdr mh{};
  mh.msg_iov = iov;
  mh.msg_iovlen = static_cast<size_t>(niov);
  return ::sendmsg(s.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

// A TLS stream's write. @return false: nothing written (flush stops), else the bytes in *w.
[[gnu::always_inline]] inline bool TcpEndpoint::send_tls(Stream& s, const iovec* iov, int niov,
                                                         ssize_t* w) {
  size_t wrote = 0;
  std::string why;
  const TlsIo io = tls_write(s.ssl.get(), iov, niov, s.tls_pack.get(), kTlsPack, &wrote, &why);
  if (io == TlsIo::kError) {
    fail(stream_error(s, ("failed TLS (" + why + ")").c_str(), 0));
    return false;
  }
  if (wrote == 0) {
    s.writable = false;  // kWantWrite, or kWantRead (a key update): an event resumes it
    return false;
  }
  *w = static_cast<ssize_t>(wrote);
  return true;
}

// A write returned < 0 (errno): a full buffer waits for EPOLLOUT; an error loses the stream
// (links) or fails the endpoint.
void TcpEndpoint::send_failed(Stream& s) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    s.writable = false;
  } else if (errno != EINTR) {
    if (links() && (link_error(errno) || fresh(s)))
      return lose(s, "a send failed: " + errno_text(errno));
    // The peer closed another stream in order: it is leaving, and this one went with it.
    if (links() && lk_.peer_closing && (errno == EPIPE || errno == ECONNRESET))
      return links_eof(s, true);
    fail(stream_error(s, "failed a send", errno));
  }
}

// `w` of `asked` bytes went: the chunks they finish are written (or done).
[[gnu::always_inline]] inline void TcpEndpoint::sent_bytes(Stream& s, size_t w, size_t asked) {
  t_->counters_.bytes_sent += static_cast<uint64_t>(w);
  s.tx_bytes += static_cast<uint64_t>(w);
  size_t left = w;
  if (left < asked) s.writable = false;  // socket buffer full; EPOLLOUT says when it drains
  while (s.unwritten()) {
    Chunk& c = s.txq.at(s.sent);
    size_t total = sizeof(FrameHeader) + c.hdr.chunk_len;
    size_t take = std::min(left, total - c.done);
    c.done += take;
    left -= take;
    if (c.done < total) break;
    // Several links: it stays until acknowledged (tcp_links.cc), so it can go again.
    if (links()) {
      ++s.sent;
    } else {
      chunk_done(s);
    }
  }
  if (links()) reap(s);
}

void TcpEndpoint::flush(Stream& s) {
  while (s.unwritten() && s.writable) {
    if (tx_pool_) {
      stage_tx(s);
      if (failed()) return;
    }
    iovec iov[kMaxIov];
    const int niov = gather(s, iov);
    if (niov == 0) return;  // progress comes back once the copy is done
    size_t asked = 0;
    for (int i = 0; i < niov; ++i) asked += iov[i].iov_len;
    ssize_t w;
    if (s.ssl) {
      if (!send_tls(s, iov, niov, &w)) return;
    } else {
      w = send_plain(s, iov, niov, asked);
    }
    if (w < 0) return send_failed(s);
    sent_bytes(s, static_cast<size_t>(w), asked);
  }
}

}  // namespace gw::drv::tcp
