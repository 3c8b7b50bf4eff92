// TCP store server: one thread, poll() over the listening socket, a wake-up eventfd and every
// client. Non-blocking I/O; requests that wait (GET, WAIT) park the client until its keys
// exist or its timeout passes. Malformed or oversized frames close that client, never the
// server, and nothing is allocated from a length before it was checked against kMaxFrame.
// A rank's session (HELLO) that closes without a BYE marks that rank as left: parked and later
// GET/WAITs that still miss keys are answered LEFT at once (tcp_store_proto.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <thread>
#include <vector>

#include "gw_store.h"
#include "log.h"
#include "gw_socket.h"
#include "gw_auth.h"
#include "tcp_store_proto.h"

namespace gw {
namespace {

namespace wire = store::wire;

constexpr size_t kMaxClients = 4096;
constexpr auto kOkReply = static_cast<uint8_t>(wire::Reply::kOk);
constexpr auto kErrorReply = static_cast<uint8_t>(wire::Reply::kError);
constexpr auto kTimeoutReply = static_cast<uint8_t>(wire::Reply::kTimeout);
constexpr auto kLeftReply = static_cast<uint8_t>(wire::Reply::kLeft);
constexpr int64_t kMaxWaitMs = int64_t{24} * 3600 * 1000;

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

struct Client {
  Fd fd;
  std::string peer;
  std::string in;  // bytes received, not yet handled, from in_off on
  size_t in_off = 0;
  std::string out;  // reply bytes not yet sent, from out_off on
  size_t out_off = 0;
  bool closed = false;
  // The key's challenge-response runs before any request: null once it passed.
  std::unique_ptr<auth::Server> auth;
  bool proof_due = false;  // the ClientHello was answered; the proof comes next
  int rank = -1;     // the rank whose session this is (HELLO), else -1
  bool bye = false;  // the session said goodbye: its close is normal
  // A parked GET/WAIT: keys[next..] may still be missing.
  bool waiting = false;
  wire::Op wait_op = wire::Op::kGet;
  std::vector<std::string> keys;
  size_t next = 0;
  Clock::time_point deadline;
};

class Server final : public TcpStoreServer {
 public:
  Server(Fd listen, Fd wake, uint16_t port, std::string where, auth::KeyPtr key)
      : listen_(std::move(listen)),
        wake_(std::move(wake)),
        port_(port),
        where_(std::move(where)),
        key_(std::move(key)) {
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
  void handle_frames(Client& c);
  /// Runs the authentication on c's input. @return whether requests may follow now.
  bool authenticate(Client& c);
  bool handle(Client& c, std::string_view payload);  // false: malformed
  void reply(Client& c, std::string frame);
  void flush(Client& c);
  void drop(Client& c, const std::string& why);
  // Re-checks parked clients after a key changed; replies to those now satisfied.
  void wake_waiters();
  bool satisfied(Client& c);
  enum class End { kDone, kTimeout, kLeft };
  void finish_wait(Client& c, End end);
  // A session closed without a goodbye: the first such rank fails every unsatisfied waiter.
  void rank_left(int rank, const std::string& why);

  std::shared_ptr<spdlog::logger> lg_ = log::get("gw.store");
  Fd listen_, wake_;
  uint16_t port_;
  std::string where_;
  std::map<std::string, std::string, std::less<>> data_;
  std::vector<std::unique_ptr<Client>> clients_;
  int left_rank_ = -1;  // the first rank that left (sticky), else -1
  auth::KeyPtr key_;
  std::thread thread_;
};

void Server::run() {
  lg_->debug("tcp store server listening on {}", where_);
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listen_.get(), POLLIN, 0});
    int timeout_ms = -1;
    auto now = Clock::now();
    for (auto& c : clients_) {
      short ev = c->out_off < c->out.size() ? POLLOUT : POLLIN;
      fds.push_back({c->fd.get(), ev, 0});
      if (c->waiting) {
        auto left = std::chrono::ceil<Millis>(c->deadline - now).count();
        left = std::clamp<int64_t>(left, 0, kMaxWaitMs);
        if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
      }
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      lg_->error("tcp store server on {}: poll failed: {}; stopping", where_, errno_text(errno));
      return;
    }
    if (fds[0].revents) return;
    // Clients accepted below get polled from the next round on; index the current ones.
    size_t n = clients_.size();
    for (size_t i = 0; i < n; ++i) {
      Client& c = *clients_[i];
      short re = fds[i + 2].revents;
      if (re & POLLOUT) flush(c);
      if (!c.closed && (re & (POLLIN | POLLHUP | POLLERR))) read_client(c);
    }
    // Requests that arrived while a reply was going out or a wait was parked. (Never called
    // from inside handle(): it walks the client's input buffer.)
    for (auto& c : clients_) handle_frames(*c);
    if (fds[1].revents & POLLIN) accept_clients();
    now = Clock::now();
    for (auto& c : clients_) {
      if (c->waiting && !c->closed && c->deadline <= now)
        finish_wait(*c, satisfied(*c) ? End::kDone : End::kTimeout);
    }
    std::erase_if(clients_, [](auto& c) { return c->closed; });
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
        lg_->warn("tcp store server on {}: accept failed: {}", where_, errno_text(errno));
      }
      return;
    }
    if (clients_.size() >= kMaxClients) {
      lg_->warn("tcp store server on {}: refusing {}: already {} clients", where_, peer_text(sa),
                kMaxClients);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Client>();
    c->fd = std::move(fd);
    c->peer = peer_text(sa);
    c->auth = std::make_unique<auth::Server>(key_, "store", nullptr, 0);
    clients_.push_back(std::move(c));
  }
}

void Server::read_client(Client& c) {
  char buf[64 * 1024];
  // Bounded per round so that one busy client cannot starve the others.
  for (int round = 0; round < 16; ++round) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n == 0) return drop(c, "");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return drop(c, "");
    }
    c.in.append(buf, static_cast<size_t>(n));
    if (c.in.size() - c.in_off > wire::kHeader + wire::kMaxFrame) {
      return drop(c, "sent more than one maximal frame while its request was pending");
    }
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
}

bool Server::authenticate(Client& c) {
  const size_t need = c.proof_due ? auth::kMac : auth::kClientHello;
  const auto* in = reinterpret_cast<const uint8_t*>(c.in.data() + c.in_off);
  if (!c.proof_due && !auth::plausible_hello(in, c.in.size() - c.in_off)) {
    drop(c, "no authentication hello (not a gradwire store client, or another version)");
    return false;
  }
  if (c.in.size() - c.in_off < need) return false;
  c.in_off += need;
  uint8_t out[auth::kServerHello];
  auto next = c.proof_due ? c.auth->on_proof(in, out) : c.auth->on_hello(in, out);
  const size_t n = c.proof_due ? auth::kVerdict : auth::kServerHello;
  if (next == auth::Server::Next::kRefuse) {
    // Say why before closing: a few bytes on a fresh socket, sent whole or not at all.
    (void)::send(c.fd.get(), out, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    drop(c, c.auth->why());
    return false;
  }
  c.proof_due = next == auth::Server::Next::kProof;
  if (!c.proof_due) c.auth.reset();
  reply(c, std::string(reinterpret_cast<const char*>(out), n));
  return !c.auth;
}

void Server::handle_frames(Client& c) {
  while (!c.closed && c.auth && c.out_off == c.out.size())
    if (!authenticate(c)) break;
  while (!c.closed && !c.auth && !c.waiting && c.out_off == c.out.size()) {
    std::string_view in(c.in.data() + c.in_off, c.in.size() - c.in_off);
    if (in.size() < wire::kHeader) break;
    auto magic = wire::get_le(in.data(), 4);
    auto len = wire::get_le(in.data() + 4, 4);
    if (magic != wire::kMagic) return drop(c, "bad magic (not a gradwire store client?)");
    if (len > wire::kMaxFrame) {
      return drop(c, "frame of " + std::to_string(len) + " bytes exceeds the limit of " +
                         std::to_string(wire::kMaxFrame));
    }
    if (in.size() < wire::kHeader + len) break;
    if (!handle(c, in.substr(wire::kHeader, len))) return drop(c, "malformed request");
    c.in_off += wire::kHeader + len;
  }
  if (c.in_off == c.in.size()) {
    c.in.clear();
    c.in_off = 0;
  } else if (c.in_off > (1u << 20)) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

bool Server::handle(Client& c, std::string_view payload) {
  wire::Reader r(payload);
  auto op = static_cast<wire::Op>(r.u8());
  auto read_keys = [&](uint32_t n) {
    c.keys.clear();
    for (uint32_t i = 0; i < n && r.ok(); ++i) c.keys.emplace_back(r.str());
  };
  auto park = [&](int64_t timeout_ms) {
    c.waiting = true;
    c.wait_op = op;
    c.next = 0;
    c.deadline = Clock::now() + Millis(std::clamp<int64_t>(timeout_ms, 0, kMaxWaitMs));
    if (satisfied(c))
      finish_wait(c, End::kDone);
    else if (left_rank_ >= 0)
      finish_wait(c, End::kLeft);
  };
  switch (op) {
    case wire::Op::kSet: {
      auto key = r.str();
      auto value = r.str();
      if (!r.ok() || !r.at_end()) return false;
      data_.insert_or_assign(std::string(key), std::string(value));
      reply(c, wire::Writer().u8(kOkReply).finish());
      wake_waiters();
      return true;
    }
    case wire::Op::kGet: {
      c.keys.assign(1, std::string(r.str()));
      int64_t timeout_ms = r.i64();
      if (!r.ok() || !r.at_end()) return false;
      park(timeout_ms);
      return true;
    }
    case wire::Op::kAdd: {
      auto key = r.str();
      int64_t delta = r.i64();
      if (!r.ok() || !r.at_end()) return false;
      int64_t old = 0;
      Status bad;
      if (auto it = data_.find(key); it != data_.end()) {
        auto parsed = store::parse_counter("tcp store " + where_, key, it->second);
        if (parsed.ok())
          old = *parsed;
        else
          bad = parsed.status();
      }
      Result<int64_t> v = bad.ok() ? store::add_checked("tcp store " + where_, key, old, delta)
                                   : Result<int64_t>(bad);
      if (!v.ok()) {
        reply(c, wire::Writer().u8(kErrorReply).str(v.status().message()).finish());
        return true;
      }
      data_.insert_or_assign(std::string(key), std::to_string(*v));
      reply(c, wire::Writer().u8(kOkReply).i64(*v).finish());
      wake_waiters();
      return true;
    }
    case wire::Op::kWait: {
      int64_t timeout_ms = r.i64();
      read_keys(r.u32());
      if (!r.ok() || !r.at_end()) return false;
      park(timeout_ms);
      return true;
    }
    case wire::Op::kCheck: {
      read_keys(r.u32());
      if (!r.ok() || !r.at_end()) return false;
      c.next = 0;
      bool all = satisfied(c);
      c.keys.clear();
      reply(c, wire::Writer().u8(kOkReply).u8(all ? 1 : 0).finish());
      return true;
    }
    case wire::Op::kHello: {
      uint32_t rank = r.u32();
      if (!r.ok() || !r.at_end() || rank > wire::kMaxRank || c.rank >= 0) return false;
      c.rank = static_cast<int>(rank);
      reply(c, wire::Writer().u8(kOkReply).finish());
      return true;
    }
    case wire::Op::kBye:
      if (!r.at_end()) return false;
      c.bye = true;
      return true;
  }
  return false;
}

bool Server::satisfied(Client& c) {
  while (c.next < c.keys.size() && data_.contains(c.keys[c.next])) ++c.next;
  return c.next == c.keys.size();
}

void Server::finish_wait(Client& c, End end) {
  c.waiting = false;
  wire::Writer w;
  if (end == End::kDone) {
    w.u8(kOkReply);
    if (c.wait_op == wire::Op::kGet) w.str(data_.find(c.keys[0])->second);
  } else {
    if (end == End::kLeft)
      w.u8(kLeftReply).u32(static_cast<uint32_t>(left_rank_));
    else
      w.u8(kTimeoutReply);
    std::vector<const std::string*> missing;
    for (size_t i = c.next; i < c.keys.size(); ++i)
      if (!data_.contains(c.keys[i])) missing.push_back(&c.keys[i]);
    w.u32(static_cast<uint32_t>(missing.size()));
    for (auto* k : missing) w.str(*k);
  }
  c.keys.clear();
  reply(c, w.finish());
}

void Server::wake_waiters() {
  for (auto& c : clients_) {
    if (c->waiting && !c->closed && satisfied(*c)) finish_wait(*c, End::kDone);
  }
}

void Server::rank_left(int rank, const std::string& why) {
  lg_->warn("tcp store server on {}: rank {} closed its store session without a goodbye{}{}; "
            "{}",
            where_, rank, why.empty() ? " (killed or crashed?)" : ": ", why,
            left_rank_ < 0 ? "failing the store waits of the other ranks" : "already failing");
  if (left_rank_ >= 0) return;
  left_rank_ = rank;
  for (auto& c : clients_) {
    if (c->waiting && !c->closed) finish_wait(*c, satisfied(*c) ? End::kDone : End::kLeft);
  }
}

void Server::reply(Client& c, std::string frame) {
  if (c.out_off == c.out.size()) {
    c.out = std::move(frame);
    c.out_off = 0;
  } else {
    c.out += frame;
  }
  flush(c);
}

void Server::flush(Client& c) {
  while (!c.closed && c.out_off < c.out.size()) {
    ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return drop(c, "");
    }
    c.out_off += static_cast<size_t>(n);
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
}

void Server::drop(Client& c, const std::string& why) {
  if (c.closed) return;
  if (!why.empty()) {
    lg_->warn("tcp store server on {}: closing client {}: {}", where_, c.peer, why);
  }
  c.closed = true;
  c.waiting = false;
  c.fd.reset();
  if (c.rank >= 0 && !c.bye) rank_left(c.rank, why);
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
