// Socket helpers of the TCP store.
#include "socket_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gw::store {

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
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

}  // namespace gw::store
