// TcpTransport: listening, connection set-up, progress loop; its keys and registration are in
// tcp_options.cc.
#include "tcp_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "log.h"
#include "tcp_endpoint.h"

namespace gw::drv::tcp {
namespace {

constexpr const char* kTlsFix = "is tcp.tls=on on every rank, with the same GW_AUTH_KEY?";

uint64_t link_speed(const std::string& iface) {
  std::ifstream f("/sys/class/net/" + iface + "/speed");
  int64_t mbps = 0;
  return (f >> mbps) && mbps > 0 ? static_cast<uint64_t>(mbps) : 0;
}

}  // namespace

Result<std::unique_ptr<Transport>> TcpTransport::open(const Config& cfg) {
  std::unique_ptr<TcpTransport> t(new TcpTransport());
  GW_RETURN_IF_ERROR(t->init(cfg));
  return std::unique_ptr<Transport>(std::move(t));
}

Status TcpTransport::init(const Config& cfg) {
  log_ = log::get("gw.drv.tcp");
  Settings set;
  GW_RETURN_IF_ERROR(read_options(cfg, &set));
  opts_ = set.opts;
  open_gpu();

  GW_ASSIGN_OR_RETURN(auto local, choose_local(set.iface, set.subnet, set.family));
  local_ = local.addr;
  local_.set_port(set.port);
  GW_RETURN_IF_ERROR(listener_.open(
      "tcp", log_, local_, sizeof(FrameHeader), opts_.hello_timeout_ms,
      [this](const uint8_t* b) -> const char* {
        FrameHeader h;
        std::memcpy(&h, b, sizeof h);
        const char* why = check_header(h, opts_.max_message);
        if (!why && h.type != static_cast<uint8_t>(FrameType::kHello))
          why = "first frame is not a hello";
        return why;
      },
      [this](Fd fd, const uint8_t* b) {
        Parked pk{std::move(fd), {}, nullptr, false, {}};
        std::memcpy(&pk.hello, b, sizeof pk.hello);
        const uint64_t key = pk.hello.tag;
        if (tls_ && (pk.hello.flags & kHelloTls)) {  // else take_parked refuses the mismatch
          auto ssl = tls_->wrap(pk.fd.get(), /*client=*/false);
          if (!ssl.ok()) {
            tls_refused_[key] = std::string(ssl.status().message());
            return;
          }
          pk.ssl = std::move(*ssl);
          pk.tls_until = Clock::now() + Millis(opts_.hello_timeout_ms);
          parked_tls_ = true;
        }
        parked_.emplace(key, std::move(pk));
      }));
  listener_.key_of([](const uint8_t* b) {
    FrameHeader h;
    std::memcpy(&h, b, sizeof h);
    return h.tag;
  });
  if (opts_.tls) {
    GW_ASSIGN_OR_RETURN(tls_, TlsContext::make(listener_.key()));
  }
  epfd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_) return Status(Code::kSystemError, "tcp: epoll_create1", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_item_;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, listener_.fd(), &ev) != 0)
    return Status(Code::kSystemError, "tcp: epoll_ctl(listener)", errno);
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_) return Status(Code::kSystemError, "tcp: eventfd", errno);
  ev.data.ptr = &wake_item_;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0)
    return Status(Code::kSystemError, "tcp: epoll_ctl(eventfd)", errno);

  uint8_t payload[32];
  size_t n = encode_addr(local_, payload);
  GW_ASSIGN_OR_RETURN(addr_, Address::make("tcp", 1, {payload, n}));
  props_.name = "tcp";
  props_.device = local.iface;
  props_.link_speed_mbps = link_speed(local.iface);
  props_.zero_copy_kinds = {MemKind::kHost, MemKind::kCudaHost};
  props_.max_message_size = opts_.max_message;
  props_.max_outstanding = static_cast<size_t>(opts_.max_outstanding);
  props_.progress_tick_us = 20'000;  // the kernel acks; the thread only keeps heartbeats going
  core_.init("tcp", log_, static_cast<size_t>(opts_.cq_depth),
             static_cast<size_t>(opts_.max_outstanding), opts_.unexpected_bytes);
  drain_.reset(new uint8_t[kDrainSize]);
  events_.resize(256);
  log_->info("tcp: listening on {} (interface {}, chosen by {}); {} stream(s) per peer{}",
             local_.to_string(), local.iface, local.why, opts_.streams,
             opts_.tls ? "; TLS 1.3 (pre-shared key from GW_AUTH_KEY)" : "");
  return Status();
}

TcpTransport::~TcpTransport() { end_background(); }

Result<std::unique_ptr<Endpoint>> TcpTransport::connect(const ConnectParams& p, Deadline deadline) {
  const std::string who = p.peer_name.empty() ? "peer" : p.peer_name;
  if (p.remote.driver() != "tcp" || p.remote.version() != 1) {
    return Status(Code::kInvalidArgument, "tcp: address of " + who + " is for driver '" +
                                              std::string(p.remote.driver()) +
                                              "' (both sides must use the same transport)");
  }
  GW_ASSIGN_OR_RETURN(SockAddr remote,
                      decode_addr(p.remote.payload().data(), p.remote.payload().size()));
  std::vector<Fd> fds;
  std::vector<SslPtr> ssls;  // tcp.tls=on: one per fd, handshake done
  if (p.active) {
    // Answer peers that dial us while we wait for this one's authentication.
    Completion none[1];
    auto idle = [&] { return progress({none, 0}).status(); };
    for (int i = 0; i < opts_.streams; ++i) {
      auto fd = dial(local_, remote, opts_.sock, deadline);
      if (!fd.ok()) return fd.status().with_context("tcp: connect to " + who);
      FrameHeader h = make_hello(p.key, static_cast<uint32_t>(opts_.streams),
                                 static_cast<uint32_t>(i), opts_.tls ? kHelloTls : 0);
      GW_RETURN_IF_ERROR(auth::client_handshake(fd->get(), listener_.key(), "tcp", &h, sizeof h,
                                                who, deadline, idle));
      fds.push_back(std::move(*fd));
    }
    if (tls_) {
      GW_ASSIGN_OR_RETURN(ssls, client_tls(fds, who + " (" + remote.to_string() + ")", deadline));
    }
  } else {
    // The peer dials us; accept (through progress) until its streams are all here.
    Completion none[1];
    for (;;) {
      if (auto it = tls_refused_.find(p.key); it != tls_refused_.end()) {
        const std::string why = it->second;
        tls_refused_.erase(it);
        return Status(Code::kUnavailable, "tcp: " + who + " (" + remote.to_string() +
                                              "): its TLS handshake failed (" + why + "); " +
                                              kTlsFix);
      }
      auto got = take_parked(p.key);
      if (got.ok()) {
        for (Parked& pk : *got) {
          fds.push_back(std::move(pk.fd));
          if (pk.ssl) ssls.push_back(std::move(pk.ssl));
        }
        break;
      }
      if (got.status().code() != Code::kUnavailable)
        return got.status().with_context("tcp: " + who + " (" + remote.to_string() + ")");
      GW_RETURN_IF_ERROR(listener_.auth_refusal(p.key, who + " (" + remote.to_string() + ")"));
      if (p.give_up) GW_RETURN_IF_ERROR(p.give_up());
      if (deadline.expired()) {
        return Status(Code::kTimeout, "tcp: " + who + " (" + remote.to_string() +
                                          ") did not connect to " + local_.to_string() +
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
  auto ep = std::make_unique<TcpEndpoint>(this, p, remote.to_string());
  eps_.push_back(ep.get());
  GW_RETURN_IF_ERROR(ep->attach(std::move(fds), std::move(ssls)));
  log_->debug("tcp: connected to {} ({}) with {} stream(s)", who, remote.to_string(),
              ep->streams_.size());
  return std::unique_ptr<Endpoint>(std::move(ep));
}

Result<std::vector<Parked>> TcpTransport::take_parked(uint64_t key) {
  auto [lo, hi] = parked_.equal_range(key);
  if (lo == hi) return Status(Code::kUnavailable, "not yet");
  size_t want = lo->second.hello.msg_len;
  std::vector<Parked*> by_index(want, nullptr);
  for (auto it = lo; it != hi; ++it) {
    auto& h = it->second.hello;
    if (h.msg_len == want && h.offset < want) by_index[h.offset] = &it->second;
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
  parked_.erase(lo, hi);
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

Result<size_t> TcpTransport::progress(std::span<Completion> out, int timeout_ms) {
  if (timeout_ms != 0 && unwatched_) watch_streams(true);  // no sleep without its wake-ups
  size_t nstreams = 0;
  bool tx = false, ready = false;
  for (TcpEndpoint* ep : eps_) {
    nstreams += ep->streams_.size();
    if (ep->failed()) continue;
    for (auto& sp : ep->streams_) {
      tx |= !sp->txq.empty();
      // Data left unread (a read budget ran out) or room to send: no edge will announce it,
      // so sleeping now would wait for the timeout.
      ready |=
          (sp->readable && sp->rx != Stream::Rx::kStalled) || (sp->writable && !sp->txq.empty());
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
      for (auto& sp : ep->streams_) sp->readable = !ep->failed();
  }
  for (TcpEndpoint* ep : eps_) {
    for (auto& sp : ep->streams_) {
      if (ep->failed()) break;

      Stream& s = *sp;
      if (s.writable && !s.txq.empty()) ep->flush(s);
      if (s.readable || s.stage_end > s.stage_begin || s.rx == Stream::Rx::kStalled) ep->read(s);
    }
  }
  if (listener_.needs_tick()) listener_.tick();
  if (!skip_epoll || background() != live_tick_.live()) liveness();
  finish_pass();
  return core_.sink().drain(out);
}

void TcpTransport::wake() {
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

Result<MemoryRegion> TcpTransport::register_memory(void* addr, size_t length, MemKind kind) {
  GW_RETURN_IF_ERROR(check_region(addr, length, kind));
  return MemoryRegion(addr, length, kind, 0, nullptr);
}

std::map<std::string, uint64_t> TcpTransport::driver_stats() const {
  const auto& c = counters_;
  return {{"bytes_sent", c.bytes_sent},
          {"bytes_received", c.bytes_received},
          {"msgs_sent", c.msgs_sent},
          {"rx_stalls", c.rx_stalls},
          {"protocol_errors", c.protocol_errors},
          {"rejected_conns", listener_.rejected()},
          {"tls_handshakes", c.tls_handshakes},
          {"staged_tx_bytes", c.staged_tx_bytes},
          {"staged_rx_bytes", c.staged_rx_bytes},
          {"epoll_unwatches", c.unwatches},
          {"heartbeats_sent", c.heartbeats_sent},
          {"heartbeats_received", c.heartbeats_received},
          {"peer_timeouts", c.peer_timeouts},
          {"streams_unwatched", unwatched_}};
}

}  // namespace gw::drv::tcp
