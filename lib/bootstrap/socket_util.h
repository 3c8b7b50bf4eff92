/// @file socket_util.h
/// Internal socket helpers of the TCP store: an owning fd, address resolution and
/// "host:port" text ("[::1]:29500" for IPv6).
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "gw_status.h"

namespace gw::store {

/// Move-only owner of a socket descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

using AddrInfoPtr = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

/// "host:port", with brackets around IPv6 literals.
std::string host_port(const std::string& host, uint16_t port);

/// getaddrinfo for TCP. @return Unavailable naming host:port and gai_strerror.
Result<AddrInfoPtr> resolve(const std::string& host, uint16_t port, bool passive);

/// "Connection refused (errno 111)".
std::string errno_text(int err);

/// Set O_NONBLOCK. @return SystemError.
Status set_nonblocking(int fd);

}  // namespace gw::store
