/// @file fuzz_util.h
/// Small helpers shared by the libFuzzer targets: reading fields off the input, raw loopback
/// sockets that play a peer, and a quiet log. Thread-safety: none (one fuzzing thread).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace gw::fuzz {

/// Takes fields off the front of the input; past the end it yields zeros.
class Input {
 public:
  Input(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t u8() { return n_ ? (--n_, *p_++) : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  std::string_view rest() const { return {reinterpret_cast<const char*>(p_), n_}; }
  std::string_view take(size_t k) {
    k = k < n_ ? k : n_;
    std::string_view s(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    n_ -= k;
    return s;
  }
  size_t size() const { return n_; }

 private:
  const uint8_t* p_;
  size_t n_;
};

/// Logging off: a target runs millions of times and every rejected input would log.
inline void quiet() { setenv("GW_LOG_LEVEL", "off", 1); }

/// Defines LLVMFuzzerInitialize for a target that needs nothing but a quiet log.
#define GW_FUZZ_QUIET_INIT()                           \
  extern "C" int LLVMFuzzerInitialize(int*, char***) { \
    ::gw::fuzz::quiet();                               \
    return 0;                                          \
  }

/// Blocking IPv4 loopback connection to `port`; -1 on failure.
inline int dial_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // A fresh source address of 127/8 per connection: thousands of inputs a second close
  // first (TIME_WAIT, 60 s), which would use up the ephemeral ports of one address in ~5 s
  // and fail connect() with EADDRNOTAVAIL (seen in CI as "the server stopped accepting").
  static uint32_t next = 0;
  const uint32_t n = next++ % (250u * 250u);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl((127u << 24) | ((2 + n / 250) << 16) | ((n % 250 + 1) << 8) | 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    // libFuzzer's SIGALRM (its -timeout watchdog) interrupts a connect() that waits for room
    // in a full accept backlog; the connection goes on: wait for it (seen in CI: EINTR).
    int err = errno;
    if (err == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      int r;
      do {
        r = ::poll(&p, 1, 10000);
      } while (r < 0 && errno == EINTR);
      socklen_t len = sizeof err;
      if (r != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = ETIMEDOUT;
    }
    if (err != 0) {
      ::close(fd);
      errno = err;
      return -1;
    }
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/// Listening IPv4 loopback socket on any port; `port` receives it. -1 on failure.
inline int listen_loopback(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  port = ntohs(a.sin_port);
  return fd;
}

/// Writes all of `s` (blocking; inputs are small enough for the socket buffer).
inline bool write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t w = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (w <= 0) return false;
    s.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

/// Reads and discards until EOF, an error, or `idle_ms` without data. @return true on EOF.
inline bool drain_until_eof(int fd, int idle_ms) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, idle_ms) <= 0) return false;
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return r == 0;
  }
}

}  // namespace gw::fuzz
