// Several links per peer (tcp_links.cc): joining streams. A fresh stream is dialled and
// authenticated without blocking (the peer may not be progressing, the link may be down); the
// dialling side keeps tcp.streams per link and tries a link without a stream each second, and
// either side joins one where message order needs a fresh stream.
#include <poll.h>

#include <cstring>

#include "gw_auth.h"
#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {

void TcpEndpoint::rejoin(uint64_t now) {
  std::vector<uint32_t> up(nlinks_, 0), pending(nlinks_, 0);
  size_t total = 0;
  for (auto& sp : streams_) {
    if (sp->state != Stream::Link::kUp) continue;
    ++up[sp->link % nlinks_];
    ++total;
  }
  for (auto& j : lk_.joining) ++pending[j->link];
  // The dialling side tries a link without a stream each second (it may have come back).
  for (uint32_t l = 0; active_ && l < nlinks_; ++l)
    if (up[l] == 0 && pending[l] == 0) start_join(l, now);
  // A lost link is replaced on one that carries (dialling side: tcp.streams per link), and a
  // fresh stream is joined for chunks sent again that no stream may carry.
  size_t want = active_ ? static_cast<size_t>(t_->opts().streams) * nlinks_ : 0;
  if (lk_.asked) want = std::max(want, total + 1);
  if (total + lk_.joining.size() >= want) return;
  uint32_t best = 0;
  for (uint32_t l = 0; l < nlinks_; ++l)
    if (up[l] > 0 && (up[best] == 0 || up[l] + pending[l] < up[best] + pending[best])) best = l;
  start_join(best, now);
}

void TcpEndpoint::start_join(uint32_t link, uint64_t now) {
  // Nothing here blocks: the peer may not be progressing, or the link may be down.
  const auto& locals = t_->links();
  SockAddr from = locals.empty() ? t_->local_ : locals[link % locals.size()];
  const SockAddr& to = lk_.remotes[link % lk_.remotes.size()];
  Fd fd(::socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd || !configure_stream(fd.get(), t_->opts().sock).ok()) return;
  from.set_port(0);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&from.ss), from.len) != 0) return;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.ss), to.len) != 0 &&
      errno != EINPROGRESS) {
    t_->log_->debug("tcp: link {} to peer {}: {}", link, peer_name_, errno_text(errno));
    return;
  }
  auto j = std::make_unique<Joining>();
  j->fd = std::move(fd);
  j->link = link;
  j->id = lk_.next_id;
  lk_.next_id += 2;  // never again, even if it fails after the peer took it
  j->since = now;
  lk_.joining.push_back(std::move(j));
}

// One step of a join's connect and authentication (auth::client_handshake, without waiting).
// @return false when it ended (joined, or failed).
bool TcpEndpoint::step_join(Joining& j, uint64_t now) {
  if (now - j.since > kJoinEveryNs) return false;  // the link or the peer does not answer
  if (!j.client) {
    pollfd p{j.fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, 0) != 1) return true;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(j.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return false;
    // msg_len: the link, so that the peer knows which streams share a queue.
    const FrameHeader h = make_hello(key_, j.link, j.id, kHelloLinks | kHelloJoin, nlinks_);
    j.client = std::make_unique<auth::Client>(t_->listener_.key(), "tcp", &h, sizeof h, peer_name_);
    uint8_t first[sizeof h + auth::kClientHello];
    std::memcpy(first, &h, sizeof h);
    std::memcpy(first + sizeof h, j.client->hello(), auth::kClientHello);
    return ::send(j.fd.get(), first, sizeof first, MSG_NOSIGNAL) ==
           static_cast<ssize_t>(sizeof first);
  }
  const size_t want = j.verdict ? auth::kVerdict : auth::kServerHello;
  const ssize_t r = ::recv(j.fd.get(), j.in + j.got, want - j.got, MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return false;
  if (r > 0) j.got += static_cast<size_t>(r);
  if (j.got < want) return true;
  Status st;
  if (!j.verdict) {
    uint8_t proof[auth::kMac];
    bool send_proof = false;
    st = j.client->on_server_hello(j.in, proof, &send_proof);
    if (send_proof &&
        ::send(j.fd.get(), proof, sizeof proof, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof proof))
      return false;
    if (st.ok() && send_proof) {
      j.verdict = true;
      j.got = 0;
      return true;
    }
  } else {
    st = j.client->on_verdict(j.in);
  }
  if (!st.ok()) {
    t_->log_->debug("tcp: joining a stream to peer {}: {}", peer_name_, st.to_string());
    return false;
  }
  if (!add_stream(std::move(j.fd), nullptr, streams_.size(), j.link).ok()) return false;
  streams_.back()->id = j.id;
  streams_.back()->moved_ns = now;
  ++t_->counters_.links_joined;
  t_->log_->info("tcp: stream {} to peer {} joined over link {}", j.id, peer_name_, j.link);
  lk_.alone_ns = 0;
  lk_.asked = false;
  return false;
}

Result<bool> TcpEndpoint::join_accepted(Fd& fd, const FrameHeader& hello) {
  const uint32_t id = static_cast<uint32_t>(hello.offset);
  if (!links() || id < kJoinIds || by_id(id)) {
    return Status(Code::kProtocolError, "tcp: peer " + peer_name_ + " joined stream " +
                                            std::to_string(id) + ", which is not a new one");
  }
  GW_RETURN_IF_ERROR(add_stream(std::move(fd), nullptr, streams_.size(),
                                static_cast<uint32_t>(hello.msg_len % nlinks_)));
  streams_.back()->id = id;
  ++t_->counters_.links_joined;
  t_->log_->info("tcp: peer {} joined stream {}", peer_name_, id);
  lk_.alone_ns = 0;
  return true;
}

void TcpTransport::take_joins() {
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (!(it->second.hello.flags & kHelloJoin)) {
      ++it;
      continue;
    }
    TcpEndpoint* to = nullptr;
    for (TcpEndpoint* ep : eps_)
      if (ep->key() == it->first && !ep->failed()) to = ep;
    if (!to && Clock::now() < it->second.tls_until) {  // its connect() has not finished here
      ++it;
      continue;
    }
    Result<bool> took = to ? to->join_accepted(it->second.fd, it->second.hello)
                           : Status(Code::kProtocolError, "tcp: a stream joined no known peer");
    if (!took.ok()) listener_.refuse(std::string(took.status().message()));
    it = parked_.erase(it);
  }
}

void TcpEndpoint::need_stream() {
  if (lk_.asked) return;
  lk_.asked = true;
  lk_.next_join_ns = 0;  // links_check joins one
}

}  // namespace gw::drv::tcp
