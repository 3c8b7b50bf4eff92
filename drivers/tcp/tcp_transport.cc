// TcpTransport: set-up (interface, listener, options), registration, stats. Connections:
// tcp_connect.cc; progress: tcp_progress.cc; keys: tcp_options.cc.
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

uint64_t link_speed(const std::string& iface) {
  std::ifstream f("/sys/class/net/" + iface + "/speed");
  int64_t mbps = 0;
  return (f >> mbps) && mbps > 0 ? static_cast<uint64_t>(mbps) : 0;
}

SockAddr any_addr(int family) {
  SockAddr a;
  a.ss.ss_family = static_cast<sa_family_t>(family);
  a.len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  return a;  // zeroed: INADDR_ANY / in6addr_any
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
  GW_RETURN_IF_ERROR(choose_links(set, &local));
  local_ = links_.size() > 1 ? any_addr(local.addr.family()) : local.addr;
  local_.set_port(set.port);
  GW_RETURN_IF_ERROR(init_listener());
  if (opts_.tls) {
    GW_ASSIGN_OR_RETURN(tls_, TlsContext::make(listener_.key()));
  }
  GW_RETURN_IF_ERROR(init_epoll());

  GW_RETURN_IF_ERROR(make_address());
  init_props(local.iface, set.ifaces);
  core_.init("tcp", log_, static_cast<size_t>(opts_.cq_depth),
             static_cast<size_t>(opts_.max_outstanding), opts_.unexpected_bytes);
  drain_.reset(new uint8_t[kDrainSize]);
  events_.resize(256);
  log_->info("tcp: listening on {} (interface {}, chosen by {}); {} stream(s) per peer{}",
             local_.to_string(), local.iface, local.why,
             opts_.streams * std::max<size_t>(1, links_.size()),
             opts_.tls ? "; TLS 1.3 (pre-shared key from GW_AUTH_KEY)" : "");
  return Status();
}

// The control listener: a stream's first frame must be a hello; hellos park by key.
Status TcpTransport::init_listener() {
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
        // A join may come before the connect() of its endpoint here took its first streams.
        if (pk.hello.flags & kHelloJoin)
          pk.tls_until = Clock::now() + Millis(opts_.hello_timeout_ms);
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
  return Status();
}

// The epoll set: the listener and the eventfd abort() wakes.
Status TcpTransport::init_epoll() {
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
  return Status();
}

void TcpTransport::init_props(const std::string& iface, const std::string& ifaces) {
  props_.name = "tcp";
  props_.device = iface;
  props_.link_speed_mbps = link_speed(iface);
  if (links_.size() > 1) {
    props_.link_speed_mbps = 0;
    for (const auto& l : link_names_) props_.link_speed_mbps += link_speed(l);
    props_.device = ifaces;
  }
  props_.zero_copy_kinds = {MemKind::kHost, MemKind::kCudaHost};
  props_.max_message_size = opts_.max_message;
  props_.max_outstanding = static_cast<size_t>(opts_.max_outstanding);
  props_.progress_tick_us = 20'000;  // the kernel acks; the thread only keeps heartbeats going
}

TcpTransport::~TcpTransport() { end_background(); }

Status TcpTransport::choose_links(const Settings& set, LocalChoice* first) {
  std::vector<std::string> names;
  for (size_t at = 0; at <= set.ifaces.size();) {
    size_t comma = std::min(set.ifaces.find(',', at), set.ifaces.size());
    if (comma > at) names.push_back(set.ifaces.substr(at, comma - at));
    at = comma + 1;
  }
  if (names.size() < 2) {
    if (names.size() == 1 && set.iface.empty()) {
      GW_ASSIGN_OR_RETURN(*first, choose_local(names[0], "", set.family));
    }
    return Status();
  }
  if (names.size() > kMaxLinks) {
    return Status(Code::kInvalidArgument, "tcp.ifaces names " + std::to_string(names.size()) +
                                              " interfaces; at most " + std::to_string(kMaxLinks) +
                                              " links are supported");
  }
  if (opts_.tls) {
    return Status(Code::kNotSupported,
                  "tcp.ifaces (several links) with tcp.tls=on is not supported: a link's "
                  "acknowledged bytes are counted on the wire, TLS's are not; use one of them");
  }
  for (const auto& n : names) {
    auto c = choose_local(n, "", set.family);
    if (!c.ok()) return c.status().with_context("tcp.ifaces");
    if (!links_.empty() && c->addr.family() != links_[0].family()) {
      return Status(Code::kInvalidArgument, "tcp.ifaces: " + n +
                                                " has another address family than " +
                                                link_names_[0] + "; set tcp.family=inet or inet6");
    }
    links_.push_back(c->addr);
    link_names_.push_back(n);
  }
  *first = LocalChoice{links_[0], link_names_[0], "tcp.ifaces"};
  return Status();
}

Status TcpTransport::make_address() {
  uint8_t payload[Address::kMaxSize];
  size_t n = 0;
  if (links_.size() < 2) {
    n = encode_addr(local_, payload);
    GW_ASSIGN_OR_RETURN(addr_, Address::make("tcp", 1, {payload, n}));
    return Status();
  }
  // Version 2: a link count, then each link's address (the listener takes every one).
  payload[n++] = static_cast<uint8_t>(links_.size());
  for (SockAddr a : links_) {
    a.set_port(local_.port());
    n += encode_addr(a, payload + n);
  }
  GW_ASSIGN_OR_RETURN(addr_, Address::make("tcp", 2, {payload, n}));
  return Status();
}

Result<std::vector<SockAddr>> decode_links(const Address& a) {
  auto p = a.payload();
  if (a.version() == 1) {
    GW_ASSIGN_OR_RETURN(SockAddr one, decode_addr(p.data(), p.size()));
    return std::vector<SockAddr>{one};
  }
  if (a.version() != 2 || p.empty() || p[0] < 2 || p[0] > TcpTransport::kMaxLinks)
    return Status(Code::kProtocolError, "tcp: malformed address (link list)");
  std::vector<SockAddr> out;
  size_t at = 1;
  for (int i = 0; i < p[0]; ++i) {
    const size_t len = at < p.size() && p[at] == 6 ? 19 : 7;
    if (at + len > p.size()) return Status(Code::kProtocolError, "tcp: malformed address (short)");
    GW_ASSIGN_OR_RETURN(SockAddr one, decode_addr(p.data() + at, len));
    out.push_back(one);
    at += len;
  }
  return out;
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
          {"links_out", c.links_out},
          {"links_joined", c.links_joined},
          {"resent_bytes", c.resent_bytes},
          {"streams_unwatched", unwatched_}};
}

}  // namespace gw::drv::tcp
