// TcpTransport: connection set-up (dial, hello, the parked accepted streams, TLS handshakes).
#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "log.h"
#include "tcp_endpoint.h"
#include "tcp_transport.h"

namespace gw::drv::tcp {
namespace {

constexpr const char* kTlsFix = "is tcp.tls=on on every rank, with the same GW_AUTH_KEY?";

}  // namespace

// A connect's sockets, before they become an endpoint's.
struct TcpTransport::PeerStreams {
  std::vector<Fd> fds;
  std::vector<SslPtr> ssls;  // tcp.tls=on: one per fd, handshake done
  uint32_t nlinks = 1;
};

Result<std::unique_ptr<Endpoint>> TcpTransport::connect(const ConnectParams& p, Deadline deadline) {
  const std::string who = p.peer_name.empty() ? "peer" : p.peer_name;
  if (p.remote.driver() != "tcp" || (p.remote.version() != 1 && p.remote.version() != 2)) {
    return Status(Code::kInvalidArgument, "tcp: address of " + who + " is for driver '" +
                                              std::string(p.remote.driver()) +
                                              "' (both sides must use the same transport)");
  }
  GW_ASSIGN_OR_RETURN(std::vector<SockAddr> remotes, decode_links(p.remote));
  const SockAddr remote = remotes[0];
  // Several links on either side: tcp.streams per link, stream i on link i % nlinks.
  uint32_t nlinks = static_cast<uint32_t>(std::max(links_.size(), remotes.size()));
  if (nlinks < 2) nlinks = 1;
  const uint32_t nstreams = static_cast<uint32_t>(opts_.streams) * nlinks;
  if (nstreams > kMaxStreams) {
    return Status(Code::kInvalidArgument,
                  "tcp: " + std::to_string(nlinks) + " links x " + std::to_string(opts_.streams) +
                      " streams is more than " + std::to_string(kMaxStreams) + " per peer");
  }
  PeerStreams got;
  got.nlinks = nlinks;  // the passive side takes the peer's
  if (p.active) {
    GW_RETURN_IF_ERROR(dial_streams(p, remotes, who, deadline, &got));
  } else {
    GW_RETURN_IF_ERROR(await_streams(p, who + " (" + remote.to_string() + ")", deadline, &got));
  }
  auto ep = std::make_unique<TcpEndpoint>(this, p, remote.to_string());
  eps_.push_back(ep.get());
  if (got.nlinks > 1) ep->set_links(got.nlinks, std::move(remotes), p.active);
  GW_RETURN_IF_ERROR(ep->attach(std::move(got.fds), std::move(got.ssls)));
  log_->debug("tcp: connected to {} ({}) with {} stream(s)", who, remote.to_string(),
              ep->streams_.size());
  return std::unique_ptr<Endpoint>(std::move(ep));
}

// Dialling side: out->nlinks x tcp.streams streams, each authenticated, then TLS when on.
Status TcpTransport::dial_streams(const ConnectParams& p, const std::vector<SockAddr>& remotes,
                                  const std::string& who, Deadline deadline, PeerStreams* out) {
  const uint32_t nlinks = out->nlinks;
  const uint32_t nstreams = static_cast<uint32_t>(opts_.streams) * nlinks;
  // Answer peers that dial us while we wait for this one's authentication.
  Completion none[1];
  auto idle = [&] { return progress({none, 0}).status(); };
  for (uint32_t i = 0; i < nstreams; ++i) {
    const uint32_t l = i % nlinks;
    const SockAddr& from = links_.empty() ? local_ : links_[l % links_.size()];
    auto fd = dial(from, remotes[l % remotes.size()], opts_.sock, deadline);
    if (!fd.ok()) return fd.status().with_context("tcp: connect to " + who);
    const uint16_t flags =
        static_cast<uint16_t>((opts_.tls ? kHelloTls : 0) | (nlinks > 1 ? kHelloLinks : 0));
    FrameHeader h = make_hello(p.key, nstreams, i, flags, nlinks > 1 ? nlinks : 0);
    GW_RETURN_IF_ERROR(auth::client_handshake(fd->get(), listener_.key(), "tcp", &h, sizeof h, who,
                                              deadline, idle));
    out->fds.push_back(std::move(*fd));
  }
  if (tls_) {
    GW_ASSIGN_OR_RETURN(out->ssls,
                        client_tls(out->fds, who + " (" + remotes[0].to_string() + ")", deadline));
  }
  return Status();
}

// Accepting side: the peer's streams, parked by progress as they arrive.
Status TcpTransport::await_streams(const ConnectParams& p, const std::string& peer,
                                   Deadline deadline, PeerStreams* out) {
  // The peer dials us; accept (through progress) until its streams are all here.
  Completion none[1];
  for (;;) {
    if (auto it = tls_refused_.find(p.key); it != tls_refused_.end()) {
      const std::string why = it->second;
      tls_refused_.erase(it);
      return Status(Code::kUnavailable,
                    "tcp: " + peer + ": its TLS handshake failed (" + why + "); " + kTlsFix);
    }
    auto got = take_parked(p.key);
    if (got.ok()) {
      const FrameHeader& h = (*got)[0].hello;
      out->nlinks = (h.flags & kHelloLinks) ? static_cast<uint32_t>(h.seq) : 1;
      for (Parked& pk : *got) {
        out->fds.push_back(std::move(pk.fd));
        if (pk.ssl) out->ssls.push_back(std::move(pk.ssl));
      }
      return Status();
    }
    if (got.status().code() != Code::kUnavailable) return got.status().with_context("tcp: " + peer);
    GW_RETURN_IF_ERROR(listener_.auth_refusal(p.key, peer));
    if (p.give_up) GW_RETURN_IF_ERROR(p.give_up());
    if (deadline.expired()) {
      return Status(Code::kTimeout, "tcp: " + peer + " did not connect to " + local_.to_string() +
                                        " in time; is it running and using the same store?");
    }
    // A stream parked by this progress is looked for at once: the 10 ms poll below only
    // ends early on new events, and was most of an accepting connect (a 2-rank
    // Group::create on loopback: 11-15 ms).
    const size_t parked = parked_.size();
    GW_RETURN_IF_ERROR(progress({none, 0}).status());
    if (parked_.size() != parked || tls_refused_.count(p.key)) continue;
    pollfd pf{epfd_.get(), POLLIN, 0};
    ::poll(&pf, 1, std::min(10, deadline.remaining_ms()));
  }
}

Result<std::vector<Parked>> TcpTransport::take_parked(uint64_t key) {
  auto [lo, hi] = parked_.equal_range(key);
  while (lo != hi && (lo->second.hello.flags & kHelloJoin)) ++lo;  // take_joins' (tcp_links.cc)
  if (lo == hi) return Status(Code::kUnavailable, "not yet");
  size_t want = lo->second.hello.msg_len;
  std::vector<Parked*> by_index(want, nullptr);
  for (auto it = lo; it != hi; ++it) {
    auto& h = it->second.hello;
    if (h.msg_len == want && h.offset < want && !(h.flags & kHelloJoin))
      by_index[h.offset] = &it->second;
  }
  for (auto* pc : by_index)
    if (!pc) return Status(Code::kUnavailable, "not yet");
  const bool tls = (lo->second.hello.flags & kHelloTls) != 0;
  if (tls != opts_.tls) {
    parked_.erase(lo, hi);  // closed: the peer learns too
    return Status(Code::kInvalidArgument,
                  std::string("dialled with tcp.tls=") + (tls ? "on" : "off") +
                      " but this rank has tcp.tls=" + (opts_.tls ? "on" : "off") +
                      "; set tcp.tls alike on every rank");
  }
  for (auto* pc : by_index)
    if (pc->ssl && !pc->tls_ready) return Status(Code::kUnavailable, "not yet");
  std::vector<Parked> out;
  for (auto* pc : by_index) out.push_back(std::move(*pc));
  for (auto it = lo; it != hi;)
    it = (it->second.hello.flags & kHelloJoin) ? std::next(it) : parked_.erase(it);
  return out;
}

bool TcpTransport::drive_parked_tls() {
  bool running = false;
  for (auto it = parked_.begin(); it != parked_.end();) {
    Parked& pk = it->second;
    if (!pk.ssl || pk.tls_ready) {
      ++it;
      continue;
    }
    std::string why;
    const TlsIo io = tls_handshake(pk.ssl.get(), &why);
    if (io == TlsIo::kOk) {
      pk.tls_ready = true;
      ++counters_.tls_handshakes;
    } else if ((io == TlsIo::kWantRead || io == TlsIo::kWantWrite) && Clock::now() < pk.tls_until) {
      running = true;
    } else {
      // Every stream of that peer goes: its connect() learns from the closed sockets, ours
      // from tls_refused_.
      const uint64_t key = it->first;
      tls_refused_[key] = io == TlsIo::kClosed ? std::string("the peer closed the connection")
                          : io == TlsIo::kError
                              ? why
                              : "not finished within tcp.hello_timeout_ms (" +
                                    std::to_string(opts_.hello_timeout_ms) + " ms)";
      log_->warn("tcp: TLS handshake of a connection (key {:#x}) failed: {}", key,
                 tls_refused_[key]);
      parked_.erase(key);
      it = parked_.begin();
      continue;
    }
    ++it;
  }
  return running;
}

Result<std::vector<SslPtr>> TcpTransport::client_tls(const std::vector<Fd>& fds,
                                                     const std::string& who, Deadline deadline) {
  std::vector<SslPtr> ssls;
  for (const Fd& fd : fds) {
    GW_ASSIGN_OR_RETURN(SslPtr s, tls_->wrap(fd.get(), /*client=*/true));
    ssls.push_back(std::move(s));
  }
  std::vector<bool> done(fds.size(), false);
  Completion none[1];
  for (size_t left = fds.size(); left > 0;) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (done[i]) continue;
      std::string why;
      const TlsIo io = tls_handshake(ssls[i].get(), &why);
      if (io == TlsIo::kOk) {
        done[i] = true;
        --left;
        ++counters_.tls_handshakes;
      } else if (io == TlsIo::kClosed || io == TlsIo::kError) {
        return Status(Code::kUnavailable,
                      "tcp: TLS handshake with " + who + " failed (" +
                          (io == TlsIo::kClosed ? std::string("it closed the connection") : why) +
                          "); " + kTlsFix);
      }
    }
    if (left == 0) break;
    if (deadline.expired()) {
      return Status(Code::kTimeout,
                    "tcp: TLS handshake with " + who + " did not finish in time; is it running?");
    }
    // Answer peers that dial us meanwhile (their handshakes too), then wait a little.
    GW_RETURN_IF_ERROR(progress({none, 0}).status());
    pollfd pf{fds[0].get(), POLLIN, 0};
    ::poll(&pf, 1, 1);
  }
  return ssls;
}

}  // namespace gw::drv::tcp
