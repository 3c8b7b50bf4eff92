/// @file raw_peer.h
/// A hand-driven TCP peer for junk-input tests: raw sockets that speak (or break) the TCP
/// driver's wire format of drivers/tcp/tcp_wire.h, while a Transport is polled beside them.
/// Thread-safety: none (one test thread).
#pragma once

#include <string>
#include <vector>

#include "gw_transport.h"
#include "tcp_wire.h"

namespace gw::conformance {

/// Owns one socket fd.
class RawFd {
 public:
  RawFd() = default;
  explicit RawFd(int fd) : fd_(fd) {}
  RawFd(RawFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RawFd& operator=(RawFd&& o) noexcept;
  RawFd(const RawFd&) = delete;
  RawFd& operator=(const RawFd&) = delete;
  ~RawFd() { reset(); }
  int get() const { return fd_; }
  void reset();

 private:
  int fd_ = -1;
};

/// The TCP address a transport listens on, decoded from its Address payload.
struct RawAddr {
  int family = 0;  ///< AF_INET or AF_INET6
  uint8_t ip[16] = {};
  uint16_t port = 0;
};
RawAddr decode(const Address& a);
/// `a` with another port (same driver, version and IP).
Address with_port(const Address& a, uint16_t port);

/// Listening socket on `where`'s IP, any port; `port` receives the port.
RawFd raw_listen(const RawAddr& where, uint16_t& port);
/// Dial `to` (blocking connect, then non-blocking). Invalid fd on failure.
RawFd raw_dial(const RawAddr& to);

/// Accept the streams a transport dialled to `lfd`, read their HELLOs and take their
/// authentication as a peer without a key; fds by stream index. `t` (if not null) is polled
/// meanwhile. Empty on failure (with a gtest failure saying why).
std::vector<RawFd> accept_streams(int lfd, Transport* t, Nanos timeout);
/// Write as much of `bytes` as the socket takes before `timeout`, polling `t` meanwhile.
/// @return bytes written.
size_t raw_write(int fd, const std::string& bytes, Transport& t, Nanos timeout);
/// Read exactly n bytes, polling `t` meanwhile (its completions go to `seen`).
bool raw_read(int fd, void* out, size_t n, Transport& t, std::vector<Completion>& seen,
              Nanos timeout);
/// Poll `t` (completions to `seen`) until `fd` is closed by the other side (EOF or reset)
/// or the timeout. Data that arrives is discarded.
bool wait_closed(int fd, Transport& t, std::vector<Completion>& seen, Nanos timeout);

/// A frame header as bytes (fields are the caller's, valid or not).
std::string frame_bytes(const drv::tcp::FrameHeader& h);

}  // namespace gw::conformance
