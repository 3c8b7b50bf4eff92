// TCP store client: blocking request/reply over a small pool of connections (a thread parked in
// get() does not hold up another thread's set()). Every read and write is bounded by a deadline;
// a dead server shows up as RemoteError at once (EOF or reset), not as a hang. A ranked client
// also holds its session connection (HELLO ... BYE, tcp_store_proto.h) for the server to watch.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "gw_auth.h"
#include "gw_config.h"
#include "gw_socket.h"
#include "gw_store.h"
#include "log.h"
#include "tcp_store_proto.h"
#include "tcp_store_replies.h"

namespace gw {
namespace {

namespace wire = store::wire;

GW_CONFIG_KEYS(store, {"store.io_timeout_ms", ConfigType::kInt, "30000",
                       "how long a TCP store client waits for the server to answer (on top of "
                       "the caller's timeout for get/wait) or to open another connection"});

constexpr size_t kMaxIdle = 8;

constexpr uint8_t op_byte(wire::Op o) { return static_cast<uint8_t>(o); }

int64_t to_ms(Nanos t) { return std::chrono::ceil<Millis>(store::bounded(t)).count(); }

// Tells the server the session ends normally. Best effort: a few bytes on an idle socket.
void send_bye(int fd) {
  auto frame = wire::Writer().u8(op_byte(wire::Op::kBye)).finish();
  (void)::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Session connections of this process's live ranked clients: exit() says goodbye on each, so
// that a rank which returns from main (or a Python interpreter that exits) without destroying
// its store is not reported as killed. A forked child skips its parent's sessions. Leaked on
// purpose: the atexit handler may run after static destructors.
struct Sessions {
  std::mutex mu;
  std::vector<std::pair<int, pid_t>> fds;
};
void goodbye_at_exit();
Sessions& sessions() {
  static Sessions* s = [] {
    auto* p = new Sessions;
    std::atexit(goodbye_at_exit);
    return p;
  }();
  return *s;
}
void goodbye_at_exit() {
  std::lock_guard lock(sessions().mu);
  for (auto [fd, pid] : sessions().fds)
    if (pid == ::getpid()) send_bye(fd);
}

// Waits for `events` on fd until the deadline. @return false on timeout.
Result<bool> wait_fd(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remaining_ms());
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return Status(Code::kSystemError, "poll: " + errno_text(errno), errno);
  }
}

// One non-blocking connect attempt to each resolved address. @return errno of the last failure.
Result<Fd> try_connect(const std::string& host, uint16_t port, const Deadline& deadline,
                       int* last_err, std::string* last_what) {
  auto ais = resolve(host, port, false);
  if (!ais.ok()) {
    *last_what = std::string(ais.status().message());
    return ais.status();
  }
  for (addrinfo* ai = ais->get(); ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      *last_err = errno;
      continue;
    }
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        GW_ASSIGN_OR_RETURN(bool ready, wait_fd(fd.get(), POLLOUT, deadline));
        socklen_t len = sizeof err;
        if (!ready)
          err = ETIMEDOUT;
        else
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    *last_err = err;
    *last_what = errno_text(err);
  }
  return Status(Code::kUnavailable, *last_what, *last_err);
}

// The key's challenge-response (gw_auth.h) on a fresh connection; a refusal is not retried.
Status authenticate(const Fd& fd, const auth::KeyPtr& key, const std::string& host, uint16_t port,
                    Deadline deadline) {
  return auth::client_handshake(fd.get(), key, "store", "", 0, "tcp store " + host_port(host, port),
                                deadline);
}

// Connects, retrying with back-off (10 ms doubling to 500 ms) until the deadline.
Result<Fd> connect_retry(const std::string& host, uint16_t port, const auth::KeyPtr& key,
                         Nanos timeout) {
  Deadline deadline(store::bounded(timeout));
  Nanos backoff = Millis(10);
  int last_err = 0;
  std::string last_what = "no attempt made";
  for (;;) {
    auto s = try_connect(host, port, deadline, &last_err, &last_what);
    if (s.ok()) {
      GW_RETURN_IF_ERROR(authenticate(*s, key, host, port, deadline));
      return s;
    }
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min<Nanos>(backoff * 2, Millis(500));
  }
  return Status(Code::kTimeout,
                "tcp store: could not connect to " + host_port(host, port) + " within " +
                    std::to_string(to_ms(timeout)) + " ms; last error: " + last_what +
                    " (is the store server / rank 0 running there and reachable?)",
                last_err);
}

/// Thread-safety: any number of threads; each request takes a connection of its own from the
/// pool (mu_ guards only the pool).
// Not `Client`: tcp_store_core.h has the server's store::Client (one name, one definition).
class TcpClient final : public Store {
 public:
  TcpClient(std::string host, uint16_t port, Nanos io_timeout, auth::KeyPtr key, StoreIdentity who)
      : host_(std::move(host)),
        port_(port),
        name_("tcp store " + host_port(host_, port)),
        replies_(name_),
        io_timeout_(io_timeout),
        key_(std::move(key)),
        who_(who) {}
  ~TcpClient() override {
    if (!session_.valid()) return;
    send_bye(session_.get());
    std::lock_guard lock(sessions().mu);
    std::erase(sessions().fds, std::pair{session_.get(), ::getpid()});
  }

  /// Makes `fd` this rank's session (HELLO), or gives it to the pool for an anonymous client.
  Status start(Fd fd) {
    if (who_.rank < 0) {
      idle_.push_back(std::move(fd));
      return Status();
    }
    auto hello = wire::Writer().u8(op_byte(wire::Op::kHello)).u32(static_cast<uint32_t>(who_.rank));
    GW_ASSIGN_OR_RETURN(auto reply, exchange("hello", fd.get(), hello.finish(), Nanos(0)));
    GW_RETURN_IF_ERROR(replies_.ok("hello", reply));
    session_ = std::move(fd);
    std::lock_guard lock(sessions().mu);
    sessions().fds.emplace_back(session_.get(), ::getpid());
    return Status();
  }

  Status set(std::string_view key, std::string_view value) override {
    GW_RETURN_IF_ERROR(store::check_sizes(name_, key, value));
    auto frame = wire::Writer().u8(op_byte(wire::Op::kSet)).str(key).str(value);
    GW_ASSIGN_OR_RETURN(auto reply, call("set", frame.finish(), Nanos(0)));
    return replies_.ok("set", reply);
  }

  Result<std::string> get(std::string_view key, Nanos timeout) override {
    GW_RETURN_IF_ERROR(store::check_sizes(name_, key, ""));
    auto frame = wire::Writer().u8(op_byte(wire::Op::kGet)).str(key).i64(to_ms(timeout));
    GW_ASSIGN_OR_RETURN(auto reply, call("get", frame.finish(), timeout));
    return replies_.get(key, timeout, reply);
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    GW_RETURN_IF_ERROR(store::check_sizes(name_, key, ""));
    auto frame = wire::Writer().u8(op_byte(wire::Op::kAdd)).str(key).i64(delta);
    GW_ASSIGN_OR_RETURN(auto reply, call("add", frame.finish(), Nanos(0)));
    return replies_.add(reply);
  }

  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    wire::Writer w;
    w.u8(op_byte(wire::Op::kWait)).i64(to_ms(timeout));
    GW_RETURN_IF_ERROR(put_keys(w, keys));
    GW_ASSIGN_OR_RETURN(auto reply, call("wait", w.finish(), timeout));
    return replies_.wait(keys.size(), timeout, reply);
  }

  Result<bool> check(std::span<const std::string> keys) override {
    wire::Writer w;
    w.u8(op_byte(wire::Op::kCheck));
    GW_RETURN_IF_ERROR(put_keys(w, keys));
    GW_ASSIGN_OR_RETURN(auto reply, call("check", w.finish(), Nanos(0)));
    return replies_.check(reply);
  }

 private:
  Status put_keys(wire::Writer& w, std::span<const std::string> keys) {
    size_t total = 0;
    for (auto& k : keys) {
      GW_RETURN_IF_ERROR(store::check_sizes(name_, k, ""));
      total += 4 + k.size();
    }
    if (total + 16 > wire::kMaxFrame) {
      return Status(Code::kInvalidArgument, name_ + ": " + std::to_string(keys.size()) +
                                                " keys of " + std::to_string(total) +
                                                " bytes in all exceed one request's limit");
    }
    w.u32(static_cast<uint32_t>(keys.size()));
    for (auto& k : keys) w.str(k);
    return Status();
  }

  // A lost server, naming the rank that serves it where known.
  Status server_lost(std::string text, int err) const {
    if (who_.server_rank < 0) return Status(Code::kRemoteError, std::move(text), err);
    return Status(Code::kRemoteError,
                  std::move(text) + ": the store server lives in rank " +
                      std::to_string(who_.server_rank) + ", which exited or was killed",
                  err)
        .with_rank(who_.server_rank);
  }

  // Sends one request and returns the reply payload. The reply may take `wait` (the server
  // parks get/wait) plus the I/O timeout.
  Result<std::string> call(const char* op, std::string frame, Nanos wait) {
    Fd fd;
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        fd = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!fd.valid()) {
      // The server was there when this store was made; if it no longer answers, say so now
      // rather than retrying for the whole I/O timeout.
      int err = 0;
      std::string what;
      auto s = try_connect(host_, port_, Deadline(io_timeout_), &err, &what);
      if (!s.ok()) {
        if (who_.server_rank >= 0)
          return server_lost(name_ + ": cannot open a connection for " + op + ": " + what, err);
        return Status(Code::kRemoteError,
                      name_ + ": cannot open a connection for " + op + ": " + what +
                          " (the store server exited? it lives in rank 0)",
                      err);
      }
      fd = std::move(*s);
      // It authenticated before; refused now, whoever answers is not the job's server.
      Status st = authenticate(fd, key_, host_, port_, Deadline(io_timeout_));
      if (!st.ok() && who_.server_rank >= 0)
        return server_lost(
            name_ + ": cannot open a connection for " + op + ": " + std::string(st.message()),
            st.sys_errno());
      GW_RETURN_IF_ERROR(st);
    }
    GW_ASSIGN_OR_RETURN(auto payload, exchange(op, fd.get(), std::move(frame), wait));
    std::lock_guard lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
    return payload;
  }

  // One request on `fd`, then its reply's payload.
  Result<std::string> exchange(const char* op, int fd, std::string frame, Nanos wait) {
    Deadline deadline(store::bounded(wait) + io_timeout_);
    GW_RETURN_IF_ERROR(send_all(op, fd, frame, deadline));
    std::string header(wire::kHeader, '\0');
    GW_RETURN_IF_ERROR(recv_all(op, fd, header.data(), header.size(), deadline));
    GW_ASSIGN_OR_RETURN(size_t len, replies_.header(op, header));
    std::string payload(len, '\0');
    GW_RETURN_IF_ERROR(recv_all(op, fd, payload.data(), len, deadline));
    return payload;
  }

  Status io_error(const char* op, const char* what, int err, const Deadline& d) const {
    if (err == 0 || err == ECONNRESET || err == EPIPE) {
      if (who_.server_rank >= 0)
        return server_lost(name_ + ": connection closed by the server during " + op, err);
      return Status(Code::kRemoteError,
                    name_ + ": connection closed by the server during " + op +
                        " (the store server exited? it lives in rank 0)",
                    err);
    }
    if (err == ETIMEDOUT && d.expired()) {
      return Status(Code::kTimeout, name_ + ": no reply to " + op + " in time (" + what + ")");
    }
    return Status(Code::kSystemError,
                  name_ + ": " + what + " during " + op + ": " + errno_text(err), err);
  }

  Status send_all(const char* op, int fd, std::string_view buf, const Deadline& d) const {
    while (!buf.empty()) {
      ssize_t n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
      if (n > 0) {
        buf.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return io_error(op, "send", errno, d);
      GW_ASSIGN_OR_RETURN(bool ready, wait_fd(fd, POLLOUT, d));
      if (!ready) return io_error(op, "send", ETIMEDOUT, d);
    }
    return Status();
  }

  Status recv_all(const char* op, int fd, char* buf, size_t len, const Deadline& d) const {
    while (len > 0) {
      ssize_t n = ::recv(fd, buf, len, 0);
      if (n > 0) {
        buf += n;
        len -= static_cast<size_t>(n);
        continue;
      }
      if (n == 0) return io_error(op, "recv", 0, d);
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return io_error(op, "recv", errno, d);
      GW_ASSIGN_OR_RETURN(bool ready, wait_fd(fd, POLLIN, d));
      if (!ready) return io_error(op, "recv", ETIMEDOUT, d);
    }
    return Status();
  }

  std::string host_;
  uint16_t port_;
  std::string name_;
  store::Replies replies_;  // reads what the server answers
  Nanos io_timeout_;
  auth::KeyPtr key_;
  StoreIdentity who_;
  Fd session_;  // this rank's session (HELLO), watched by the server; never used for requests
  std::mutex mu_;
  std::vector<Fd> idle_;
};

}  // namespace

Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 Nanos timeout, StoreIdentity who) {
  if (host.empty() || port == 0) {
    return Status(
        Code::kInvalidArgument,
        "tcp store: need a host and a non-zero port to connect to, got " + host_port(host, port));
  }
  if (who.rank > static_cast<int>(wire::kMaxRank)) {
    return Status(Code::kInvalidArgument, "tcp store: rank " + std::to_string(who.rank) +
                                              " is over the limit of " +
                                              std::to_string(wire::kMaxRank));
  }
  GW_ASSIGN_OR_RETURN(auto cfg, Config::global());
  GW_ASSIGN_OR_RETURN(int64_t io_ms, cfg.get_int("store.io_timeout_ms"));
  if (io_ms <= 0) {
    return Status(Code::kInvalidArgument,
                  "store.io_timeout_ms must be > 0, got " + std::to_string(io_ms));
  }
  GW_ASSIGN_OR_RETURN(auth::KeyPtr key, auth::process_key());
  GW_ASSIGN_OR_RETURN(Fd fd, connect_retry(host, port, key, timeout));
  log::get("gw.store")->debug("connected to tcp store {}", host_port(host, port));
  Nanos io_timeout = store::bounded(Millis(std::min<int64_t>(io_ms, 86'400'000)));
  auto client = std::make_shared<TcpClient>(host, port, io_timeout, std::move(key), who);
  GW_RETURN_IF_ERROR(client->start(std::move(fd)));
  return std::shared_ptr<Store>(std::move(client));
}

}  // namespace gw
