/// @file gw_socket.h
/// Socket plumbing shared by the tcp driver, rdma's control connection and the TCP store: an
/// fd owner, local address choice (interface by name or subnet, IPv4/IPv6), listening,
/// dialling with a deadline, per-stream socket options, name resolution. Setup paths only.
#pragma once

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gw_status.h"
#include "gw_time.h"

namespace gw {

/// Move-only owner of a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  explicit operator bool() const { return fd_ >= 0; }
  bool valid() const { return fd_ >= 0; }
  /// Closes the descriptor now.
  void reset();

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family() const { return ss.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t p);
  /// "127.0.0.1:5000" or "[::1]:5000".
  std::string to_string() const;
};

struct LocalChoice {
  SockAddr addr;      ///< port 0
  std::string iface;  ///< interface name
  std::string why;    ///< how it was chosen, for the log
};

/// Pick the local address: `iface` by name, else `subnet` ("10.0.0.0/8", "fd00::/8"), else the
/// first up non-loopback interface, else loopback. family: "inet", "inet6" or "auto".
/// @return Unavailable naming what was asked and what exists.
Result<LocalChoice> choose_local(const std::string& iface, const std::string& subnet,
                                 const std::string& family);

/// Listening socket bound to `addr` (port 0 = any; addr's port is updated).
Result<Fd> listen_on(SockAddr& addr, int backlog);

/// Encode/decode a SockAddr as 7 (IPv4) or 19 (IPv6) bytes: family, port, address.
size_t encode_addr(const SockAddr& a, uint8_t* out);
Result<SockAddr> decode_addr(const uint8_t* p, size_t n);

struct StreamOptions {
  int sndbuf = 0;  ///< 0 = leave the kernel's autotuning alone
  int rcvbuf = 0;
  int user_timeout_ms = 0;  ///< TCP_USER_TIMEOUT; 0 = kernel default
  int keepalive_s = 0;      ///< idle seconds before keepalive probes; 0 = off
};

/// Non-blocking, TCP_NODELAY, buffers and liveness options.
Status configure_stream(int fd, const StreamOptions& o);

/// Dial `remote` from `local` (port 0) before the deadline, retrying refused connections.
/// @return Timeout/SystemError naming the remote and the last error.
Result<Fd> dial(const SockAddr& local, const SockAddr& remote, const StreamOptions& o,
                Deadline deadline);

/// Write all of buf to a non-blocking fd before the deadline (setup path only).
Status write_all(int fd, const void* buf, size_t n, Deadline deadline);

using AddrInfoPtr = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

/// "host:port", with brackets around IPv6 literals.
std::string host_port(const std::string& host, uint16_t port);

/// getaddrinfo for TCP. @return Unavailable naming host:port and gai_strerror.
Result<AddrInfoPtr> resolve(const std::string& host, uint16_t port, bool passive);

/// "Connection refused (errno 111)".
std::string errno_text(int err);

/// Set O_NONBLOCK. @return SystemError.
Status set_nonblocking(int fd);

}  // namespace gw
