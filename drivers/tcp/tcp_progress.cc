// TcpTransport's progress loop: epoll events, busy polling of idle streams, wake-ups.
// No allocation, no logging above trace.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "tcp_endpoint.h"
#include "tcp_transport.h"

namespace gw::drv::tcp {

Status TcpTransport::wait_events(int timeout_ms) {
  int n = ::epoll_wait(epfd_.get(), events_.data(), static_cast<int>(events_.size()), timeout_ms);
  if (n < 0 && errno != EINTR) return Status(Code::kSystemError, "tcp: epoll_wait", errno);
  for (int i = 0; i < n; ++i) {
    auto* item = static_cast<PollItem*>(events_[i].data.ptr);
    uint32_t e = events_[i].events;
    if (item->kind == PollItem::kListener) {
      listener_.service();
    } else if (item->kind == PollItem::kWake) {
      uint64_t v;
      (void)!::read(wake_.get(), &v, sizeof v);  // take_abort() below does the rest
    } else {
      auto* s = static_cast<Stream*>(item);
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) s->readable = true;
      if (e & (EPOLLRDHUP | EPOLLERR | EPOLLHUP)) s->hup = true;
      if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) s->writable = true;
    }
  }
  return Status();
}

void TcpTransport::watch_streams(bool on) {
  direct_polls_ = 0;
  if (unwatched_ == !on) return;  // already so
  for (TcpEndpoint* ep : eps_)
    if (!ep->failed()) ep->watch(on);
  unwatched_ = !on;
  counters_.unwatches += !on;
}

// Each stream's due writes and reads (progress's last step; inlined, one call site).
[[gnu::always_inline]] inline void TcpTransport::serve_streams() {
  for (TcpEndpoint* ep : eps_) {
    for (size_t i = 0; i < ep->streams_.size(); ++i) {  // a join may add streams
      if (ep->failed()) break;
      Stream& s = *ep->streams_[i];
      if (!s.fd) continue;  // given up both ways
      if (s.writable && s.unwritten() && s.state == Stream::Link::kUp) ep->flush(s);
      if (s.rx_closed) continue;  // the peer gave it up: what it still holds is sent again
      if (s.readable || s.stage_end > s.stage_begin || s.rx == Stream::Rx::kStalled) {
        ep->read(s);
        if (ep->links() && !ep->failed()) ep->send_ack(s);
      }
    }
  }
}

Result<size_t> TcpTransport::progress(std::span<Completion> out, int timeout_ms) {
  if (timeout_ms != 0 && unwatched_) watch_streams(true);  // no sleep without its wake-ups
  size_t nstreams = 0;
  bool tx = false, ready = false;
  if (!parked_.empty()) take_joins();
  for (TcpEndpoint* ep : eps_) {
    nstreams += ep->streams_.size();
    if (ep->failed()) continue;
    if (ep->links()) ep->links_poll();  // several links (tcp_links.cc)
    for (auto& sp : ep->streams_) {
      tx |= sp->unwritten();
      // Data left unread (a read budget ran out) or room to send: no edge will announce it,
      // so sleeping now would wait for the timeout.
      ready |=
          (sp->readable && sp->rx != Stream::Rx::kStalled) || (sp->writable && sp->unwritten());
    }
  }
  if (!rx_copies_.empty()) {
    poll_rx_copies();
    ready = true;  // device copies have no fd to sleep on
  }
  if (parked_tls_) {
    parked_tls_ = drive_parked_tls();
    if (parked_tls_ && timeout_ms != 0) timeout_ms = 1;  // their sockets are not in epoll
  }
  if (ready) timeout_ms = 0;
  // Busy polling few idle streams: a recv() each is cheaper than epoll_wait() + recv().
  // Every 64th poll still asks epoll (listener, abort, hang-ups). A send waiting for room
  // needs epoll's EPOLLOUT (trying send() every poll too cost 8 MiB bandwidth 5 %).
  const bool direct = timeout_ms == 0 && nstreams > 0 && nstreams <= kDirectStreams &&
                      !listener_.has_pending() && !tx;
  if (!direct) {
    if (unwatched_) watch_streams(true);
    direct_polls_ = 0;
  } else if (!unwatched_ && ++direct_polls_ >= kUnwatchAfter) {
    watch_streams(false);
  }
  const bool skip_epoll = direct && (++polls_ & 63) != 0;
  if (!skip_epoll) GW_RETURN_IF_ERROR(wait_events(timeout_ms));
  if (direct) {
    for (TcpEndpoint* ep : eps_)
      for (auto& sp : ep->streams_) sp->readable = !ep->failed() && sp->fd && !sp->rx_closed;
  }
  serve_streams();
  if (listener_.needs_tick()) listener_.tick();
  if (!skip_epoll || background() != live_tick_.live()) liveness();
  finish_pass();
  return core_.sink().drain(out);
}

void TcpTransport::wake() {
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

}  // namespace gw::drv::tcp
