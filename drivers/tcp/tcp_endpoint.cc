// TcpEndpoint: setup, teardown, posting of requests, failure.
#include "tcp_endpoint.h"

#include <sys/epoll.h>

#include "log.h"

namespace gw::drv::tcp {

TcpEndpoint::TcpEndpoint(TcpTransport* t, const ConnectParams& p, std::string remote)
    : t_(t), remote_(std::move(remote)), key_(p.key) {
  peer_id_ = p.peer_id;
  peer_name_ = p.peer_name.empty() ? remote_ : p.peer_name;
  const auto& o = t->opts();
  sends_.resize(static_cast<size_t>(o.max_outstanding));
  for (int i = o.max_outstanding; i-- > 0;) free_sends_.push_back(i);
  core_.init(&t->core(), this, static_cast<size_t>(o.max_outstanding), kMaxInMsgs, this);
  ext_.resize(kMaxInMsgs);
}

Status TcpEndpoint::attach(std::vector<Fd> fds, std::vector<SslPtr> ssls) {
  for (size_t i = 0; i < fds.size(); ++i)
    GW_RETURN_IF_ERROR(add_stream(std::move(fds[i]), &ssls, i, static_cast<uint32_t>(i % nlinks_)));
  return Status();
}

Status TcpEndpoint::add_stream(Fd fd, std::vector<SslPtr>* ssls, size_t i, uint32_t link) {
  const auto& o = t_->opts();
  GW_RETURN_IF_ERROR(configure_stream(fd.get(), o.sock));
  auto s = std::make_unique<Stream>();
  if (ssls && i < ssls->size()) {
    s->ssl = std::move((*ssls)[i]);
    s->tls_pack.reset(new uint8_t[kTlsPack]);
  }
  s->kind = PollItem::kStream;
  s->ep = this;
  s->link = static_cast<uint8_t>(link);
  s->txq.init(static_cast<size_t>(o.max_outstanding) + 8);  // + heartbeats and cuts
  s->stage.reset(new uint8_t[kStageSize]);
  s->fd = std::move(fd);
  s->moved_ns = now_ns();
  s->id = static_cast<uint32_t>(i);
  GW_RETURN_IF_ERROR(set_watched(*s, true));
  streams_.push_back(std::move(s));
  return Status();
}

void TcpEndpoint::chunk_done(Stream& s) {
  Chunk& c = s.txq.front();
  if (links()) s.queued -= sizeof(FrameHeader) + c.hdr.chunk_len;
  if (c.send_slot < 0) {  // a heartbeat or a cut
    s.txq.pop();
    return;
  }
  SendSlot& slot = sends_[c.send_slot];
  const int idx = c.send_slot;
  if (c.stage_slot >= 0) release_tx_slot(s, c);
  s.txq.pop();
  if (--slot.chunks_left == 0) {
    slot.used = false;
    free_sends_.push_back(idx);
    ++t_->counters_.msgs_sent;
    if (slot.eager >= 0) lk_.eager_free.push_back(slot.eager);
    if (!slot.early)
      core_.complete(slot.req.wr_id, slot.req.tag, slot.req.len, Op::kSend, Code::kOk);
  }
}

Status TcpEndpoint::set_watched(Stream& s, bool on) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = static_cast<PollItem*>(&s);
  if (::epoll_ctl(t_->epoll_fd(), on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, s.fd.get(), &ev) != 0) {
    return Status(Code::kSystemError,
                  std::string("tcp: epoll_ctl(") + (on ? "ADD" : "DEL") + ") for " + peer_name_,
                  errno);
  }
  s.watched = on;
  return Status();
}

void TcpEndpoint::watch(bool on) {
  for (auto& s : streams_) {
    if (s->watched == on || !s->fd) continue;  // a failed endpoint's (or stream's) are closed
    Status st = set_watched(*s, on);
    if (!st.ok()) {
      if (!on) continue;  // left in the set: it only costs the wake-ups it saves
      fail(st);
      return;
    }
    // Edges while out of the set were missed: read and write until the socket says EAGAIN.
    s->readable = s->writable = true;
  }
}

TcpEndpoint::~TcpEndpoint() {
  // Pending requests and buffered data go with core_ (no completions: nobody is left).
  for (auto& s : streams_) {
    if (s->rx_slot >= 0) t_->rx_pool_now()->release(s->rx_slot);
  }
  t_->endpoint_gone(this);
}

int TcpEndpoint::chunks_for(uint64_t len) const {
  const auto& o = t_->opts();
  uint64_t n = (len + kMaxChunk - 1) / kMaxChunk;
  if (o.streams > 1 && len >= o.stripe_min) {
    uint64_t s = static_cast<uint64_t>(o.streams);
    n = (n + s - 1) / s * s;  // a multiple of the stream count, so the load is even
  }
  return static_cast<int>(n == 0 ? 1 : n);
}

Result<size_t> TcpEndpoint::post_send(std::span<const SendRequest> reqs) {
  if (const Status& no = core_.refusal(); !no.ok()) [[unlikely]]
    return no;
  const size_t nstreams = streams_.size();
  size_t n = 0;
  for (; n < reqs.size(); ++n) {
    const SendRequest& r = reqs[n];
    if (Status st = core::check_send("tcp", peer_name_, r, t_->opts().max_message); !st.ok()) {
      if (n == 0) return st;
      break;
    }
    // Device memory goes in chunks of one staging slot, copied to pinned memory ahead.
    const bool dev = r.len > 0 && t_->is_device(r.buf, r.mr);
    if (dev) {
      if (Status st = ensure_tx_pool(); !st.ok()) {
        if (n == 0) return st;
        break;
      }
    }
    if (links()) {  // streams take chunks as they deliver (tcp_links.cc)
      if (!post_links(r, dev).ok()) break;
      continue;
    }
    const int chunks =
        dev ? static_cast<int>((r.len + tx_pool_->chunk_bytes() - 1) / tx_pool_->chunk_bytes())
            : chunks_for(r.len);
    // Messages below 16 KiB stay on stream 0 (latency); larger ones rotate or stripe.
    const size_t first = (chunks == 1 && r.len < kLatencyMax) ? 0 : rr_ % nstreams;
    const size_t per_stream = (static_cast<size_t>(chunks) + nstreams - 1) / nstreams;
    bool room = !free_sends_.empty();
    for (size_t i = 0; room && i < std::min<size_t>(chunks, nstreams); ++i) {
      auto& q = streams_[(first + i) % nstreams]->txq;
      room = q.capacity() - q.size() >= per_stream;
    }
    if (!room || !core_.reserve()) break;
    int slot = free_sends_.back();
    free_sends_.pop_back();
    sends_[slot] = SendSlot{r, static_cast<uint32_t>(chunks), true};
    const uint64_t seq = tx_seq_++;
    const uint64_t chunk = dev ? tx_pool_->chunk_bytes() : (r.len + chunks - 1) / chunks;
    auto* p = static_cast<const uint8_t*>(r.buf);
    for (int c = 0; c < chunks; ++c) {
      uint64_t off = std::min<uint64_t>(c * chunk, r.len);
      uint64_t len = std::min<uint64_t>(chunk, r.len - off);
      Chunk ch{make_data_header(r.tag, r.len, seq, off, static_cast<uint32_t>(len)),
               p && !dev ? p + off : nullptr,
               slot,
               0,
               dev ? p + off : nullptr,
               -1};
      streams_[(first + c) % nstreams]->txq.push(ch);
    }
    if (chunks > 1 || r.len >= kLatencyMax) ++rr_;
  }
  if (links()) feed();
  for (auto& s : streams_)
    if (s->unwritten() && s->writable && s->state == Stream::Link::kUp) flush(*s);
  return n;
}

Result<size_t> TcpEndpoint::post_recv(std::span<const RecvRequest> reqs) {
  return core_.post_recv(reqs, [this](const RecvRequest& r) {
    if (Status st = core::check_recv("tcp", peer_name_, r); !st.ok()) return st;
    if (r.len > 0 && t_->is_device(r.buf, r.mr)) return t_->rx_pool().status();
    return Status();
  });
}

Status TcpEndpoint::stream_error(const Stream& s, const char* what, int err) const {
  size_t idx = 0;
  while (idx < streams_.size() && streams_[idx].get() != &s) ++idx;
  return Status(Code::kRemoteError,
                "tcp: peer " + peer_name_ + " (" + remote_ + ") " + what + " on stream " +
                    std::to_string(idx) + " of " + std::to_string(streams_.size()) +
                    "; it exited or failed — check its log",
                err);
}

void TcpEndpoint::fail(const Status& st, bool keep_buffered) {
  if (!core_.set_error(st, keep_buffered, free_sends_.size() < sends_.size())) return;
  const Code code = st.code();
  for (size_t i = 0; i < sends_.size(); ++i) {
    if (!sends_[i].used) continue;
    sends_[i].used = false;
    free_sends_.push_back(static_cast<int>(i));
    if (sends_[i].eager >= 0) lk_.eager_free.push_back(sends_[i].eager);
    if (!sends_[i].early)
      core_.complete(sends_[i].req.wr_id, sends_[i].req.tag, 0, Op::kSend, code);
  }
  // Fully read: a buffered message waits for its receive, or a receive for its copy to the
  // GPU (rx_copy_done completes it).
  core_.fail_receives(code, [&](int m) {
    return keep_buffered && ext_[m].received == core_.msg(m).len &&
           core_.msg(m).dest != core::Dest::kDrain;
  });
  lk_.pend.clear();
  lk_.resend.clear();
  for (auto& s : streams_) {
    if (s->rx_slot >= 0) t_->rx_pool_now()->release(s->rx_slot);
    s->rx_slot = -1;
    s->rx_staged = false;
    s->txq.clear();
    s->sent = 0;
    s->fd = Fd();  // closing removes it from the epoll set
    s->readable = s->writable = false;
    s->rx = Stream::Rx::kHeader;
    s->stage_begin = s->stage_end = 0;
  }
  core_.report_error();
}

}  // namespace gw::drv::tcp
