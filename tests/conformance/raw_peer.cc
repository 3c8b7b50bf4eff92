// Raw sockets for junk-input tests.
#include "raw_peer.h"

#include "gw_auth.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace gw::conformance {
namespace {

socklen_t to_sockaddr(const RawAddr& a, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (a.family == AF_INET6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(a.port);
    std::memcpy(&s6->sin6_addr, a.ip, 16);
    return sizeof *s6;
  }
  auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
  s4->sin_family = AF_INET;
  s4->sin_port = htons(a.port);
  std::memcpy(&s4->sin_addr, a.ip, 4);
  return sizeof *s4;
}

void drain_cq(Transport* t, std::vector<Completion>& seen) {
  if (!t) return;
  std::array<Completion, 16> out;
  auto n = t->cq().poll(out);
  if (n.ok()) seen.insert(seen.end(), out.begin(), out.begin() + static_cast<ptrdiff_t>(*n));
}

// Sleep on `fd` (events) and the transport's fd (if any) for up to 10 ms.
void wait_either(int fd, short events, Transport* t) {
  pollfd p[2] = {{fd, events, 0}, {t ? t->cq().wait_fd() : -1, POLLIN, 0}};
  ::poll(p, p[1].fd >= 0 ? 2 : 1, 10);
}

bool read_n(int fd, void* out, size_t n, Transport* t, std::vector<Completion>& seen,
            Nanos timeout) {
  Deadline dl(timeout);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, static_cast<uint8_t*>(out) + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR) || dl.expired()) return false;
    drain_cq(t, seen);
    wait_either(fd, POLLIN, t);
  }
  return true;
}

}  // namespace

RawFd& RawFd::operator=(RawFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void RawFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

RawAddr decode(const Address& a) {
  RawAddr r;
  auto p = a.payload();
  EXPECT_GE(p.size(), 7u) << "tcp address payload too short";
  if (p.size() < 7) return r;
  r.family = p[0] == 6 ? AF_INET6 : AF_INET;
  r.port = static_cast<uint16_t>(p[1] << 8 | p[2]);
  size_t iplen = r.family == AF_INET6 ? 16 : 4;
  EXPECT_GE(p.size(), 3 + iplen);
  std::memcpy(r.ip, p.data() + 3, std::min(iplen, p.size() - 3));
  return r;
}

Address with_port(const Address& a, uint16_t port) {
  std::vector<uint8_t> p(a.payload().begin(), a.payload().end());
  p[1] = static_cast<uint8_t>(port >> 8);
  p[2] = static_cast<uint8_t>(port);
  auto r = Address::make(a.driver(), a.version(), p);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : Address();
}

RawFd raw_listen(const RawAddr& where, uint16_t& port) {
  RawFd fd(::socket(where.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  RawAddr any = where;
  any.port = 0;
  sockaddr_storage ss;
  socklen_t len = to_sockaddr(any, ss);
  if (fd.get() < 0 || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(fd.get(), 64) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    ADD_FAILURE() << "raw listen: " << std::strerror(errno);
    return RawFd();
  }
  port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

RawFd raw_dial(const RawAddr& to) {
  RawFd fd(::socket(to.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage ss;
  socklen_t len = to_sockaddr(to, ss);
  if (fd.get() < 0 || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    ADD_FAILURE() << "raw dial: " << std::strerror(errno);
    return RawFd();
  }
  return fd;
}

std::vector<RawFd> accept_streams(int lfd, Transport* t, Nanos timeout) {
  Deadline dl(timeout);
  std::vector<Completion> seen;
  std::vector<RawFd> by_index;
  size_t want = 1, got = 0;
  while (got < want) {
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (dl.expired()) {
        ADD_FAILURE() << "the transport did not dial " << want << " stream(s) in time";
        return {};
      }
      wait_either(lfd, POLLIN, t);
      continue;
    }
    RawFd s(fd);
    drv::tcp::FrameHeader h{};
    uint8_t ch[auth::kClientHello], sh[auth::kServerHello];
    if (!read_n(s.get(), &h, sizeof h, t, seen, dl.remaining()) ||
        !read_n(s.get(), ch, sizeof ch, t, seen, dl.remaining())) {
      ADD_FAILURE() << "no hello and authentication on a dialled stream";
      return {};
    }
    // Take it as a peer without a key does.
    (void)auth::Server(nullptr, "tcp", reinterpret_cast<uint8_t*>(&h), sizeof h).on_hello(ch, sh);
    if (::send(s.get(), sh, sizeof sh, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof sh)) {
      ADD_FAILURE() << "cannot answer the authentication";
      return {};
    }
    if (h.magic != drv::tcp::kMagic || h.type != uint8_t(drv::tcp::FrameType::kHello) ||
        h.msg_len == 0 || h.msg_len > drv::tcp::kMaxStreams || h.offset >= h.msg_len) {
      ADD_FAILURE() << "bad hello from the transport: streams " << h.msg_len << " index "
                    << h.offset;
      return {};
    }
    want = h.msg_len;
    by_index.resize(want);
    by_index[h.offset] = std::move(s);
    ++got;
  }
  return by_index;
}

size_t raw_write(int fd, const std::string& bytes, Transport& t, Nanos timeout) {
  Deadline dl(timeout);
  std::vector<Completion> seen;
  size_t done = 0;
  while (done < bytes.size() && !dl.expired()) {
    ssize_t w = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) break;  // the transport closed it
    drain_cq(&t, seen);
    wait_either(fd, POLLOUT, &t);
  }
  return done;
}

bool raw_read(int fd, void* out, size_t n, Transport& t, std::vector<Completion>& seen,
              Nanos timeout) {
  return read_n(fd, out, n, &t, seen, timeout);
}

bool wait_closed(int fd, Transport& t, std::vector<Completion>& seen, Nanos timeout) {
  Deadline dl(timeout);
  std::array<uint8_t, 4096> sink;
  for (;;) {
    ssize_t r = ::recv(fd, sink.data(), sink.size(), MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return true;
    if (r > 0) continue;
    if (dl.expired()) return false;
    drain_cq(&t, seen);
    wait_either(fd, POLLIN, &t);
  }
}

std::string frame_bytes(const drv::tcp::FrameHeader& h) {
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

}  // namespace gw::conformance
