// Socket setup: address choice, listen, dial, options, name resolution. Setup paths only.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "gw_socket.h"

namespace gw {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(ss).sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6&>(ss).sin6_port);
}

void SockAddr::set_port(uint16_t p) {
  if (family() == AF_INET)
    reinterpret_cast<sockaddr_in&>(ss).sin_port = htons(p);
  else
    reinterpret_cast<sockaddr_in6&>(ss).sin6_port = htons(p);
}

std::string SockAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port());
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(port());
}

namespace {

struct Subnet {
  int family = 0;
  uint8_t bytes[16]{};
  int prefix = 0;
};

Result<Subnet> parse_subnet(const std::string& s) {
  Subnet n;
  auto slash = s.find('/');
  std::string ip = s.substr(0, slash);
  n.family = ip.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  int max = n.family == AF_INET ? 32 : 128;
  n.prefix = slash == std::string::npos ? max : std::atoi(s.c_str() + slash + 1);
  if (inet_pton(n.family, ip.c_str(), n.bytes) != 1 || n.prefix < 0 || n.prefix > max) {
    return Status(Code::kInvalidArgument,
                  "tcp.subnet '" + s + "' is not of the form 10.0.0.0/8 or fd00::/8");
  }
  return n;
}

bool in_subnet(const sockaddr* sa, const Subnet& n) {
  if (sa->sa_family != n.family) return false;
  const uint8_t* a =
      n.family == AF_INET
          ? reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  for (int bit = 0; bit < n.prefix; ++bit) {
    int mask = 0x80 >> (bit % 8);
    if ((a[bit / 8] & mask) != (n.bytes[bit / 8] & mask)) return false;
  }
  return true;
}

bool is_link_local6(const sockaddr* sa) {
  if (sa->sa_family != AF_INET6) return false;
  return IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

}  // namespace

// How much an up IPv4/IPv6 address is preferred (0 best), or -1 if it may not be used.
static int preference(const ifaddrs& i, const std::string& iface, const Subnet* net) {
  int f = i.ifa_addr->sa_family;
  if (is_link_local6(i.ifa_addr)) return -1;  // needs a scope id peers cannot use
  if (!iface.empty()) return iface != i.ifa_name ? -1 : (f == AF_INET ? 0 : 1);
  if (net) return in_subnet(i.ifa_addr, *net) ? 0 : -1;
  bool lo = i.ifa_flags & IFF_LOOPBACK;
  return (lo ? 4 : 0) + (f == AF_INET ? 0 : 1);
}

Result<LocalChoice> choose_local(const std::string& iface, const std::string& subnet,
                                 const std::string& family) {
  int want = 0;
  if (family == "inet") {
    want = AF_INET;
  } else if (family == "inet6") {
    want = AF_INET6;
  } else if (family != "auto") {
    return Status(Code::kInvalidArgument,
                  "tcp.family '" + family + "' must be inet, inet6 or auto");
  }
  Subnet net;
  if (!subnet.empty()) {
    GW_ASSIGN_OR_RETURN(net, parse_subnet(subnet));
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Status(Code::kSystemError, "getifaddrs", errno);
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, freeifaddrs);
  const ifaddrs* best = nullptr;
  int best_rank = 99;
  std::string seen;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if (seen.find(i->ifa_name) == std::string::npos) seen += std::string(" ") + i->ifa_name;
    if (want && f != want) continue;
    int rank = preference(*i, iface, subnet.empty() ? nullptr : &net);
    if (rank >= 0 && rank < best_rank) {
      best = i;
      best_rank = rank;
    }
  }
  if (!best) {
    std::string asked = !iface.empty()    ? "interface '" + iface + "'"
                        : !subnet.empty() ? "subnet " + subnet
                                          : std::string("any interface");
    return Status(Code::kUnavailable, "tcp: no " + (family == "auto" ? "" : family + " ") +
                                          "address on " + asked + "; interfaces up:" + seen +
                                          " (set tcp.iface or tcp.subnet)");
  }
  LocalChoice c;
  c.iface = best->ifa_name;
  c.addr.len = best->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&c.addr.ss, best->ifa_addr, c.addr.len);
  c.addr.set_port(0);
  c.why = !iface.empty()    ? "tcp.iface"
          : !subnet.empty() ? "tcp.subnet " + subnet
                            : "first up interface, non-loopback first";
  return c;
}

Result<Fd> listen_on(SockAddr& addr, int backlog) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status(Code::kSystemError, "tcp: socket()", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr.ss), addr.len) != 0)
    return Status(Code::kSystemError, "tcp: bind " + addr.to_string(), errno);
  if (::listen(fd.get(), backlog) != 0)
    return Status(Code::kSystemError, "tcp: listen " + addr.to_string(), errno);
  socklen_t len = sizeof addr.ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr.ss), &len);
  return fd;
}

size_t encode_addr(const SockAddr& a, uint8_t* out) {
  uint16_t port = htons(a.port());
  out[0] = a.family() == AF_INET ? 4 : 6;
  std::memcpy(out + 1, &port, 2);
  if (a.family() == AF_INET) {
    std::memcpy(out + 3, &reinterpret_cast<const sockaddr_in&>(a.ss).sin_addr, 4);
    return 7;
  }
  std::memcpy(out + 3, &reinterpret_cast<const sockaddr_in6&>(a.ss).sin6_addr, 16);
  return 19;
}

Result<SockAddr> decode_addr(const uint8_t* p, size_t n) {
  SockAddr a;
  uint16_t port;
  if (n == 7 && p[0] == 4) {
    auto& s = reinterpret_cast<sockaddr_in&>(a.ss);
    s.sin_family = AF_INET;
    std::memcpy(&port, p + 1, 2);
    std::memcpy(&s.sin_addr, p + 3, 4);
    s.sin_port = port;
    a.len = sizeof s;
    return a;
  }
  if (n == 19 && p[0] == 6) {
    auto& s = reinterpret_cast<sockaddr_in6&>(a.ss);
    s.sin6_family = AF_INET6;
    std::memcpy(&port, p + 1, 2);
    std::memcpy(&s.sin6_addr, p + 3, 16);
    s.sin6_port = port;
    a.len = sizeof s;
    return a;
  }
  return Status(Code::kProtocolError, "tcp: malformed peer address (" + std::to_string(n) +
                                          " bytes, family byte " + std::to_string(n ? p[0] : 0) +
                                          ")");
}

Status configure_stream(int fd, const StreamOptions& o) {
  int one = 1;
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return Status(Code::kSystemError, "tcp: fcntl(O_NONBLOCK)", errno);
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return Status(Code::kSystemError, "tcp: setsockopt(TCP_NODELAY)", errno);
  if (o.sndbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o.sndbuf, sizeof o.sndbuf);
  if (o.rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o.rcvbuf, sizeof o.rcvbuf);
  if (o.user_timeout_ms > 0) {
    unsigned t = static_cast<unsigned>(o.user_timeout_ms);
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &t, sizeof t);
  }
  if (o.keepalive_s > 0) {
    int cnt = 3;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &o.keepalive_s, sizeof o.keepalive_s);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &o.keepalive_s, sizeof o.keepalive_s);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  }
  return Status();
}

Result<Fd> dial(const SockAddr& local, const SockAddr& remote, const StreamOptions& o,
                Deadline deadline) {
  int last = 0;
  auto backoff = Millis(1);
  while (true) {
    Fd fd(::socket(remote.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status(Code::kSystemError, "tcp: socket()", errno);
    GW_RETURN_IF_ERROR(configure_stream(fd.get(), o));
    if (local.family() == remote.family()) {
      SockAddr l = local;
      l.set_port(0);
      if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&l.ss), l.len) != 0)
        return Status(Code::kSystemError, "tcp: bind " + l.to_string(), errno);
    }
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&remote.ss), remote.len);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int n = ::poll(&p, 1, deadline.remaining_ms());
      if (n == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err ? -1 : 0;
        errno = err;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) return fd;
    last = errno;
    if (deadline.expired() || (last != ECONNREFUSED && last != EAGAIN && last != ETIMEDOUT)) {
      return Status(deadline.expired() ? Code::kTimeout : Code::kSystemError,
                    "tcp: connect to " + remote.to_string(), last);
    }
    std::this_thread::sleep_for(std::min<Nanos>(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, Millis(100));
  }
}

Status write_all(int fd, const void* buf, size_t n, Deadline deadline) {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR)
      return Status(Code::kSystemError, "tcp: send", errno);
    if (deadline.expired()) return Status(Code::kTimeout, "tcp: send timed out");
    pollfd pf{fd, POLLOUT, 0};
    ::poll(&pf, 1, deadline.remaining_ms());
  }
  return Status();
}

std::string host_port(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<AddrInfoPtr> resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 && !passive && rc == EAI_NONAME) {
    // AI_ADDRCONFIG hides ::1 and 127.0.0.1 on hosts whose only interface is loopback.
    hints.ai_flags = 0;
    rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  }
  if (rc != 0) {
    return Status(Code::kUnavailable,
                  "cannot resolve " + host_port(host, port) + ": " + ::gai_strerror(rc));
  }
  return AddrInfoPtr(res, ::freeaddrinfo);
}

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

Status set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status(Code::kSystemError, "fcntl(O_NONBLOCK): " + errno_text(errno), errno);
  }
  return Status();
}

}  // namespace gw
