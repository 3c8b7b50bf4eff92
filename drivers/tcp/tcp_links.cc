// Several links per peer (tcp.ifaces). One message is striped over every link by what each
// delivers: a stream takes the next chunk while fewer than tcp.link_window_bytes of its own are
// unacknowledged. A send completes once the peer says it read its chunks (kAck), so a sender
// still holds whatever a dead link may have swallowed. Each direction fails over alone: a
// sender whose stream stops carrying (its kernel's acknowledgements stop moving) gives it up
// and sends every chunk it held again on the others, marked with where it was first sent
// (kResent); the receiver reads the given-up stream until the first such chunk, then takes a
// marked chunk only if it had not read it there. Nothing else need cross the dead link, so no
// control message can wait behind data the receiver cannot take yet.
// A chunk of a message the peer has not begun may not follow a later message on a stream (the
// peer reads a stream in order and would wait for it behind that one): such a chunk goes on a
// fresh stream, which the side that needs it joins at once. The dialling side also joins a
// stream to a link without one each second, so a link that comes back carries again
// (tcp_join.cc).
// No allocation on the data path; lk_.resend and lk_.closed_rx grow only after a link is lost.
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {
namespace {

uint64_t frame_bytes(const FrameHeader& h) { return sizeof(FrameHeader) + h.chunk_len; }

}  // namespace

void TcpEndpoint::set_links(uint32_t n, std::vector<SockAddr> remotes, bool active) {
  nlinks_ = n;
  lk_.remotes = std::move(remotes);
  active_ = active;
  lk_.next_id = kJoinIds + (active ? 0 : 1);
  lk_.pend.init(sends_.size());
  lk_.fault_ns = now_ns();
  lk_.eager.reset(new uint8_t[kEagerSlots * kLatencyMax]);
  for (int i = kEagerSlots; i-- > 0;) lk_.eager_free.push_back(i);
}

Stream* TcpEndpoint::by_id(uint32_t id) {
  for (auto& sp : streams_)
    if (sp->id == id) return sp.get();
  return nullptr;
}

Status TcpEndpoint::post_links(const SendRequest& r, bool dev) {
  if (lk_.pend.full() || free_sends_.empty() || !core_.reserve())
    return Status(Code::kUnavailable, "full");
  const uint64_t chunk = dev ? tx_pool_->chunk_bytes() : t_->opts().link_chunk;
  const uint64_t chunks = r.len == 0 ? 1 : (r.len + chunk - 1) / chunk;
  const int slot = free_sends_.back();
  free_sends_.pop_back();
  SendSlot& ss = sends_[slot];
  ss = SendSlot{r, static_cast<uint32_t>(chunks), true, dev, tx_seq_++, chunk};
  if (!dev && r.len <= kLatencyMax && (r.len == 0 || !lk_.eager_free.empty())) {
    if (r.len > 0) {
      ss.eager = lk_.eager_free.back();
      lk_.eager_free.pop_back();
      uint8_t* copy = lk_.eager.get() + static_cast<size_t>(ss.eager) * kLatencyMax;
      std::memcpy(copy, r.buf, r.len);
      ss.req.buf = copy;
    }
    ss.early = true;
    core_.complete(r.wr_id, r.tag, r.len, Op::kSend, Code::kOk);
  }
  lk_.pend.push(slot);
  return Status();
}

bool TcpEndpoint::next_chunk(Chunk* c) {
  if (lk_.pend.empty()) return false;
  const int slot = lk_.pend.front();
  const SendSlot& ss = sends_[slot];
  const uint64_t off = lk_.pend_off;
  const uint64_t len = std::min(ss.chunk, ss.req.len - off);
  auto* p = static_cast<const uint8_t*>(ss.req.buf);
  *c = Chunk{make_data_header(ss.req.tag, ss.req.len, ss.seq, off, static_cast<uint32_t>(len)),
             p && !ss.dev ? p + off : nullptr,
             slot,
             0,
             ss.dev ? p + off : nullptr,
             -1,
             0};
  lk_.pend_off += len;
  if (lk_.pend_off >= ss.req.len) {
    lk_.pend.pop();
    lk_.pend_off = 0;
  }
  return true;
}

void TcpEndpoint::push_frame(Stream& s, Chunk c) {
  c.done = 0;
  s.pushed += frame_bytes(c.hdr);
  c.end = s.pushed;
  s.queued += frame_bytes(c.hdr);
  if (c.send_slot >= 0) s.max_seq = std::max(s.max_seq, c.hdr.seq);
  s.txq.push(c);
}

void TcpEndpoint::feed() {
  const uint64_t window = t_->opts().link_window;
  auto room = [&](const Stream& s) {
    return s.state == Stream::Link::kUp && s.txq.size() + 4 < s.txq.capacity() && s.queued < window;
  };
  while (!lk_.pend.empty() || !lk_.resend.empty()) {
    // The stream with the fewest unacknowledged bytes takes the next chunk.
    Stream* best = nullptr;
    if (!lk_.resend.empty()) {
      const uint64_t seq = lk_.resend.front().hdr.seq;
      bool may = false;
      for (auto& sp : streams_) {
        const bool ok =
            sp->state == Stream::Link::kUp && (seq < lk_.peer_next || seq >= sp->max_seq);
        may |= ok;
        if (ok && room(*sp) && (!best || sp->queued < best->queued)) best = sp.get();
      }
      if (best) {
        push_frame(*best, lk_.resend.front());
        lk_.resend.erase(lk_.resend.begin());
        continue;
      }
      if (!may) need_stream();
    }
    for (auto& sp : streams_)
      if (room(*sp) && (!best || sp->queued < best->queued)) best = sp.get();
    Chunk c;
    if (!best || !next_chunk(&c)) return;
    push_frame(*best, c);
  }
}

void TcpEndpoint::reap(Stream& s) {
  // Heartbeats and acks are never sent again: they leave once written.
  while (s.sent > 0) {
    const Chunk& c = s.txq.front();
    if (c.send_slot >= 0 && c.end > s.acked) break;
    --s.sent;
    chunk_done(s);
  }
}

void TcpEndpoint::on_ack(const FrameHeader& h) {
  if (!links()) return;
  lk_.peer_next = std::max(lk_.peer_next, h.msg_len);
  Stream* s = by_id(static_cast<uint32_t>(h.offset));
  if (!s || s->state != Stream::Link::kUp) return;  // given up: its chunks went elsewhere
  if (h.seq <= s->acked) return;                    // an older one that came another way
  if (h.seq > s->tx_bytes) {
    ++t_->counters_.protocol_errors;
    fail(Status(Code::kProtocolError, "tcp: peer " + peer_name_ + " acknowledged byte " +
                                          std::to_string(h.seq) + " of a stream with " +
                                          std::to_string(s->tx_bytes) + " sent"));
    return;
  }
  s->acked = h.seq;
  reap(*s);
}

void TcpEndpoint::send_ack(Stream& s, bool now) {
  // Once the stream is read dry, or every quarter window while it streams.
  if (s.rx_ackable == s.rx_acked ||
      (!now && s.readable && s.rx_ackable - s.rx_acked < t_->opts().link_window / 4))
    return;
  // On the stream itself; on another when we send no more on it.
  Stream* via = &s;
  if (s.state != Stream::Link::kUp) {
    via = nullptr;
    for (auto& sp : streams_)
      if (sp->state == Stream::Link::kUp && (!via || sp->queued < via->queued)) via = sp.get();
  }
  if (!via || via->txq.full()) {
    // Not dropped: the peer's sends complete on it, and this stream may never be read again.
    lk_.ack_owed = true;
    return;
  }
  s.rx_acked = s.rx_ackable;
  push_frame(*via, Chunk{make_ack(s.id, s.rx_acked, next_match_), nullptr, -1, 0, nullptr, -1, 0});
  // Out now, even if the last write filled the socket: the peer's send completes on it, and
  // our caller may stop driving this transport once its own requests are done.
  via->writable = true;
  flush(*via);
}

bool TcpEndpoint::take_resent(const FrameHeader& h) {
  const uint32_t from = static_cast<uint32_t>(h.pad[1]);
  if (Stream* s = by_id(from); s && !s->rx_closed) close_rx(*s);
  // A copy sent again: the stream its last copy was on is read no more either (that copy may
  // be read in part there, and its sender wrote no more of it).
  if (Stream* s = by_id(h.reserved); s && !s->rx_closed) close_rx(*s);
  for (const auto& [id, read] : lk_.closed_rx)
    if (id == from && h.pad[0] <= read) return false;  // read where it was first sent
  // Every copy names the stream it was first sent on: one copy is taken at a time (one read
  // in part on a stream read no more is forgotten by close_rx, so the next one is taken).
  return lk_.taken.emplace(from, h.pad[0]).second;
}

void TcpEndpoint::close_rx(Stream& s) {
  if (s.rx_closed) return;
  s.rx_closed = true;
  s.readable = false;
  s.eof = true;  // for "every stream closed": we read it no more
  t_->log_->debug("tcp: stream {} from peer {}: read no more ({} bytes read)", s.id, peer_name_,
                  s.rx_bytes);
  lk_.closed_rx.emplace_back(s.id, s.rx_bytes);
  // A copy taken here and not read whole: another copy is to be taken.
  const bool taken = s.rx == Stream::Rx::kStalled || (s.rx == Stream::Rx::kPayload && s.msg >= 0);
  if (taken && (s.hdr.flags & kResent))
    lk_.taken.erase({static_cast<uint32_t>(s.hdr.pad[1]), s.hdr.pad[0]});
  // A chunk read in part is sent again whole (bytes already placed are the same).
  if (s.rx_slot >= 0) t_->rx_pool_now()->release(s.rx_slot);
  s.rx_slot = -1;
  s.rx_staged = false;
  s.rx = Stream::Rx::kHeader;
  s.msg = -1;
  s.stage_begin = s.stage_end = 0;
  if (s.state == Stream::Link::kOut) down(s);
}

void TcpEndpoint::links_poll() {
  if (!lk_.pend.empty() || !lk_.resend.empty()) feed();
  if (lk_.ack_owed) {
    lk_.ack_owed = false;
    for (auto& z : streams_)
      if (z->rx_ackable != z->rx_acked) send_ack(*z, true);
  }
}

void TcpEndpoint::links_check(uint64_t now) {
  if (!links() || failed()) return;
  const auto& o = t_->opts();
  // Streams given up both ways (closed) leave.
  std::erase_if(streams_, [](const std::unique_ptr<Stream>& sp) { return !sp->fd; });
  // Bytes sent and not acknowledged by the peer's kernel that do not move, on every stream of
  // a link: the link is down. (One stream's bytes may wait behind another's in the link's
  // queue; bytes the kernel has not sent, the peer's window being shut, are back-pressure.)
  std::vector<uint64_t> moved(nlinks_, 0);
  for (auto& sp : streams_) {
    Stream& s = *sp;
    if (s.state != Stream::Link::kUp) continue;
    int outq = 0, unsent = 0;
    if (::ioctl(s.fd.get(), SIOCOUTQ, &outq) != 0 || ::ioctl(s.fd.get(), SIOCOUTQNSD, &unsent) != 0)
      continue;
    const uint64_t kacked = s.tx_bytes - static_cast<uint64_t>(outq);
    if (kacked != s.kacked || outq == unsent || window_shut(s)) {
      s.moved_ns = now;
      s.kacked = kacked;
    }
    s.stuck = static_cast<uint64_t>(outq - unsent);
    moved[s.link % nlinks_] = std::max(moved[s.link % nlinks_], s.moved_ns);
  }
  for (size_t i = 0; i < streams_.size() && !failed(); ++i) {
    Stream& s = *streams_[i];
    const uint64_t last = moved[s.link % nlinks_];
    if (s.state != Stream::Link::kUp || now - last <= o.link_timeout_ns) continue;
    retire(s, "link " + std::to_string(s.link) + ": " + std::to_string(s.stuck) +
                  " bytes sent on it not acknowledged for " +
                  std::to_string((now - last) / 1'000'000) + " ms (tcp.link_timeout_ms)");
  }
  for (size_t k = 0; k < lk_.joining.size();) {
    if (step_join(*lk_.joining[k], now)) {
      ++k;
    } else {
      lk_.joining.erase(lk_.joining.begin() + static_cast<long>(k));
    }
  }
  if (lk_.alone_ns && now > lk_.alone_ns &&
      now - lk_.alone_ns > 4 * o.link_timeout_ns + o.peer_timeout_ns) {
    fail(Status(Code::kRemoteError, "tcp: every link to peer " + peer_name_ + " (" + remote_ +
                                        ") failed and no " +
                                        "stream could be joined again within " +
                                        std::to_string((now - lk_.alone_ns) / 1'000'000) +
                                        " ms — check the links and the peer"));
    return;
  }
  // Only the dialling side: both sides giving up a different stream at once is not a fault
  // a link has.
  if (o.link_fault_ns && active_ && now - lk_.fault_ns >= o.link_fault_ns && !failed()) {
    lk_.fault_ns = now;
    inject_fault();
  }
  if (!failed() && now >= lk_.next_join_ns && (active_ || lk_.asked)) {
    lk_.next_join_ns = now + (lk_.asked ? kJoinEveryNs / 10 : kJoinEveryNs);
    rejoin(now);
  }
}

bool TcpEndpoint::window_shut(const Stream& s) {
  // Zero-window probes: the peer's socket is full (it does not read), the link carries.
  tcp_info ti{};
  socklen_t len = sizeof ti;
  return ::getsockopt(s.fd.get(), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_probes > 0;
}

void TcpEndpoint::inject_fault() {
  // A stream that carries data if there is one, and never the last.
  Stream* pick = nullptr;
  size_t up = 0;
  for (auto& sp : streams_) {
    if (sp->state != Stream::Link::kUp) continue;
    ++up;
    if (!pick || (sp->sent > 0 && pick->sent == 0)) pick = sp.get();
  }
  if (up >= 2) retire(*pick, "tcp.link_fault_ms (fault injection)");
}

void TcpEndpoint::lose(Stream& s, const std::string& why) { retire(s, why); }

void TcpEndpoint::links_eof(Stream& s, bool between) {
  // A dead link sends no FIN: the peer's process closed it, or it gave the stream up. Mid-frame
  // on a stream still in use, the peer died sending; once every stream is closed, it left.
  if (s.state == Stream::Link::kUp && !between && !fresh(s)) {
    fail(stream_error(s, "closed the connection", 0));
    return;
  }
  // Closed by the peer: nothing to tell it, and it may be leaving (tcp_send.cc).
  lk_.peer_closing |= between;
  retire(s, "the peer closed it", false, false);
  close_rx(s);
  bool all = true;
  for (auto& o : streams_) all &= o->eof;
  if (all && !failed()) fail(stream_error(s, "closed the connection", 0), true);
}

// Every chunk `s` holds goes again (lk_.resend, in order), marked with where it was first sent.
void TcpEndpoint::requeue(Stream& s) {
  for (size_t k = 0; k < s.txq.size(); ++k) {
    Chunk c = s.txq.at(k);
    if (c.send_slot < 0) continue;  // heartbeats and acks are not sent again (see below)
    if (c.stage_slot >= 0) {
      release_tx_slot(s, c);  // staged again on the stream that takes it
      c.payload = nullptr;
    }
    if (!(c.hdr.flags & kResent)) {  // a chunk sent again twice keeps its first stream
      c.hdr.flags |= kResent;
      c.hdr.pad[0] = c.end;
      c.hdr.pad[1] = s.id;
    }
    c.hdr.reserved = s.id;  // ... and names the one it was last given up on
    t_->counters_.resent_bytes += c.hdr.chunk_len;
    auto by_order = [](const Chunk& a, const Chunk& b) {
      return a.hdr.seq != b.hdr.seq ? a.hdr.seq < b.hdr.seq : a.hdr.offset < b.hdr.offset;
    };
    lk_.resend.insert(std::upper_bound(lk_.resend.begin(), lk_.resend.end(), c, by_order), c);
  }
  s.txq.clear();
  s.sent = 0;
  s.queued = 0;
}

void TcpEndpoint::retire(Stream& s, const std::string& why, bool tell, bool warn) {
  if (s.state != Stream::Link::kUp) return;
  s.state = Stream::Link::kOut;
  ++t_->counters_.links_out;
  requeue(s);
  size_t up = 0;
  for (auto& sp : streams_) up += sp->state == Stream::Link::kUp;
  if (up == 0) {
    // Until one joins (links_check; the peer may join one too), what it held waits.
    if (!lk_.alone_ns) lk_.alone_ns = now_ns();
    need_stream();
    t_->log_->log(warn ? spdlog::level::warn : spdlog::level::debug,
                  "tcp: stream {} (link {}) to peer {} given up ({}) was the last; joining "
                  "another",
                  s.id, s.link, peer_name_, why);
  } else {
    t_->log_->log(warn ? spdlog::level::warn : spdlog::level::debug,
                  "tcp: stream {} (link {}) to peer {} given up: {}; {} stream(s) carry on", s.id,
                  s.link, peer_name_, why, up);
  }
  if (active_) lk_.next_join_ns = 0;  // replace it at the next check
  // Acks it carried (queued, or written but unread: the peer stops reading it at our first
  // re-sent chunk) are lost: every stream's goes again on the others.
  for (auto& z : streams_) {
    z->rx_acked = 0;
    send_ack(*z, true);
  }
  if (s.rx_closed) {
    down(s);
  } else if (tell) {
    // The peer may not have seen the link die (it sends nothing on it): it gives it up too.
    for (auto& sp : streams_) {
      if (sp->state != Stream::Link::kUp || sp->txq.full()) continue;
      push_frame(*sp, Chunk{make_give_up(s.id), nullptr, -1, 0, nullptr, -1, 0});
      if (sp->writable) flush(*sp);
      break;
    }
  }
  feed();
}

void TcpEndpoint::down(Stream& s) {
  s.fd.reset();  // out of the epoll set
  s.readable = s.writable = false;
  s.eof = true;
  t_->log_->info("tcp: stream {} to peer {} closed ({} bytes sent on it, {} read)", s.id,
                 peer_name_, s.tx_bytes, s.rx_bytes);
}

}  // namespace gw::drv::tcp
