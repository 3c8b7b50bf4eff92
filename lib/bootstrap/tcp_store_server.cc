// TCP store server: one thread, poll() over the listening socket, a wake-up eventfd and every
// client. Non-blocking I/O; requests that wait (GET, WAIT) park the client until its keys
// exist or its timeout passes. What the requests do is StoreCore's (tcp_store_core.cc); this
// file moves the bytes. A rank's session (HELLO) that closes without a BYE marks that rank as
// left: parked and later GET/WAITs that still miss keys are answered LEFT at once
// (tcp_store_proto.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

#include "gw_auth.h"
#include "gw_socket.h"
#include "gw_store.h"
#include "log.h"
#include "tcp_store_core.h"

namespace gw {
namespace {

using store::Client;
using store::kMaxWaitMs;

constexpr size_t kMaxClients = 4096;

std::string peer_text(const sockaddr_storage& sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&sa);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&sa);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return host_port(host, port);
}

class Server final : public TcpStoreServer, private store::StoreCore {
 public:
  Server(Fd listen, Fd wake, uint16_t port, std::string where, auth::KeyPtr key)
      : StoreCore(std::move(where), std::move(key)),
        listen_(std::move(listen)),
        wake_(std::move(wake)),
        port_(port) {
    thread_ = std::thread([this] { run(); });
  }
  ~Server() override {
    uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0) lg_->error("tcp store: cannot wake server");
    thread_.join();
  }
  uint16_t port() const override { return port_; }

 private:
  void run();
  void accept_clients();
  void read_client(Client& c);
  void flush(Client& c) override;
  void send_last(Client& c, const uint8_t* p, size_t n) override {
    (void)::send(c.fd.get(), p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  }

  Fd listen_, wake_;
  uint16_t port_;
  std::thread thread_;
};

void Server::run() {
  lg_->debug("tcp store server listening on {}", where());
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listen_.get(), POLLIN, 0});
    int timeout_ms = -1;
    auto now = Clock::now();
    for (auto& c : clients()) {
      short ev = c->out_off < c->out.size() ? POLLOUT : POLLIN;
      fds.push_back({c->fd.get(), ev, 0});
      if (c->waiting) {
        auto left = std::chrono::ceil<Millis>(c->deadline - now).count();
        left = std::clamp<int64_t>(left, 0, kMaxWaitMs);
        if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
      }
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      lg_->error("tcp store server on {}: poll failed: {}; stopping", where(), errno_text(errno));
      return;
    }
    if (fds[0].revents) return;
    // Clients accepted below get polled from the next round on; index the current ones.
    size_t n = clients().size();
    for (size_t i = 0; i < n; ++i) {
      Client& c = *clients()[i];
      short re = fds[i + 2].revents;
      if (re & POLLOUT) flush(c);
      if (!c.closed && (re & (POLLIN | POLLHUP | POLLERR))) read_client(c);
    }
    // Requests that arrived while a reply was going out or a wait was parked. (Never called
    // from inside handle(): it walks the client's input buffer.)
    for (auto& c : clients()) handle_frames(*c);
    if (fds[1].revents & POLLIN) accept_clients();
    expire(Clock::now());
    sweep();
  }
}

void Server::accept_clients() {
  for (;;) {
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    Fd fd(::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&sa), &len,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        lg_->warn("tcp store server on {}: accept failed: {}", where(), errno_text(errno));
      }
      return;
    }
    if (clients().size() >= kMaxClients) {
      lg_->warn("tcp store server on {}: refusing {}: already {} clients", where(), peer_text(sa),
                kMaxClients);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    add_client(std::move(fd), peer_text(sa));
  }
}

void Server::read_client(Client& c) {
  char buf[64 * 1024];
  // Bounded per round so that one busy client cannot starve the others.
  for (int round = 0; round < 16; ++round) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n == 0) return hang_up(c);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return hang_up(c);
    }
    received(c, {buf, static_cast<size_t>(n)});
    if (c.closed) return;
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
}

void Server::flush(Client& c) {
  while (!c.closed && c.out_off < c.out.size()) {
    ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return hang_up(c);
    }
    c.out_off += static_cast<size_t>(n);
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
}

Result<Fd> listen_on(const addrinfo& ai, bool dual_stack) {
  Fd fd(::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!fd.valid()) return Status(Code::kSystemError, "socket: " + errno_text(errno), errno);
  int one = 1, zero = 0;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ai.ai_family == AF_INET6) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof one);
  }
  if (::bind(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    return Status(Code::kSystemError, "bind: " + errno_text(errno), errno);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return Status(Code::kSystemError, "listen: " + errno_text(errno), errno);
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string& host,
                                                              uint16_t port) {
  // An empty host means every interface: one IPv6 socket that also takes IPv4, falling back to
  // IPv4 alone where IPv6 is disabled.
  std::vector<std::string> tries =
      host.empty() ? std::vector<std::string>{"::", "0.0.0.0"} : std::vector<std::string>{host};
  Status last;
  Fd fd;
  for (auto& h : tries) {
    auto ais = resolve(h, port, true);
    if (!ais.ok()) {
      last = ais.status();
      continue;
    }
    for (addrinfo* ai = ais->get(); ai && !fd.valid(); ai = ai->ai_next) {
      auto s = listen_on(*ai, host.empty());
      if (s.ok())
        fd = std::move(*s);
      else
        last = s.status();
    }
    if (fd.valid()) break;
  }
  std::string where = host_port(host.empty() ? "*" : host, port);
  if (!fd.valid()) {
    return Status(
        last.code(),
        "tcp store server: cannot listen on " + where + ": " + std::string(last.message()) +
            (last.sys_errno() == EADDRINUSE ? " (another process holds the port: pick another "
                                              "master port)"
                                            : ""),
        last.sys_errno());
  }
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  uint16_t bound = ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  GW_ASSIGN_OR_RETURN(auth::KeyPtr key, auth::process_key());
  Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return Status(Code::kSystemError, "tcp store server: eventfd: " + errno_text(errno), errno);
  }
  where = host_port(host.empty() ? "*" : host, bound);
  return std::unique_ptr<TcpStoreServer>(
      std::make_unique<Server>(std::move(fd), std::move(wake), bound, where, std::move(key)));
}

}  // namespace gw
