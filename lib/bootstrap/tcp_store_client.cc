// TCP store client: blocking request/reply over a small pool of connections (a thread parked in
// get() does not hold up another thread's set()). Every read and write is bounded by a deadline;
// a dead server shows up as RemoteError at once (EOF or reset), not as a hang.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>
#include <vector>

#include "gw_config.h"
#include "gw_store.h"
#include "log.h"
#include "gw_socket.h"
#include "gw_auth.h"
#include "tcp_store_proto.h"

namespace gw {
namespace {

namespace wire = store::wire;

GW_CONFIG_KEYS(store, {"store.io_timeout_ms", ConfigType::kInt, "30000",
                       "how long a TCP store client waits for the server to answer (on top of "
                       "the caller's timeout for get/wait) or to open another connection"});

constexpr size_t kMaxIdle = 8;

constexpr uint8_t op_byte(wire::Op o) { return static_cast<uint8_t>(o); }

int64_t to_ms(Nanos t) { return std::chrono::ceil<Millis>(store::bounded(t)).count(); }

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
    Fd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
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
Status authenticate(const Fd& fd, const auth::KeyPtr& key, const std::string& host,
                    uint16_t port, Deadline deadline) {
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
class Client final : public Store {
 public:
  Client(std::string host, uint16_t port, Nanos io_timeout, auth::KeyPtr key, Fd first)
      : host_(std::move(host)),
        port_(port),
        name_("tcp store " + host_port(host_, port)),
        io_timeout_(io_timeout),
        key_(std::move(key)) {
    idle_.push_back(std::move(first));
  }

  Status set(std::string_view key, std::string_view value) override {
    GW_RETURN_IF_ERROR(store::check_sizes(name_, key, value));
    auto frame = wire::Writer().u8(op_byte(wire::Op::kSet)).str(key).str(value);
    GW_ASSIGN_OR_RETURN(auto reply, call("set", frame.finish(), Nanos(0)));
    return expect_ok("set", reply);
  }

  Result<std::string> get(std::string_view key, Nanos timeout) override {
    GW_RETURN_IF_ERROR(store::check_sizes(name_, key, ""));
    auto frame = wire::Writer().u8(op_byte(wire::Op::kGet)).str(key).i64(to_ms(timeout));
    GW_ASSIGN_OR_RETURN(auto reply, call("get", frame.finish(), timeout));
    wire::Reader r(reply);
    auto st = static_cast<wire::Reply>(r.u8());
    if (st == wire::Reply::kTimeout) {
      std::string k(key);
      return store::missing_keys_timeout(name_, {&k, 1}, timeout);
    }
    auto value = r.str();
    if (st != wire::Reply::kOk || !r.ok() || !r.at_end()) return bad_reply("get");
    return std::string(value);
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    GW_RETURN_IF_ERROR(store::check_sizes(name_, key, ""));
    auto frame = wire::Writer().u8(op_byte(wire::Op::kAdd)).str(key).i64(delta);
    GW_ASSIGN_OR_RETURN(auto reply, call("add", frame.finish(), Nanos(0)));
    wire::Reader r(reply);
    auto st = static_cast<wire::Reply>(r.u8());
    if (st == wire::Reply::kError) {
      auto msg = r.str();
      if (r.ok()) return Status(Code::kInvalidArgument, std::string(msg));
    }
    int64_t v = r.i64();
    if (st != wire::Reply::kOk || !r.ok() || !r.at_end()) return bad_reply("add");
    return v;
  }

  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    wire::Writer w;
    w.u8(op_byte(wire::Op::kWait)).i64(to_ms(timeout));
    GW_RETURN_IF_ERROR(put_keys(w, keys));
    GW_ASSIGN_OR_RETURN(auto reply, call("wait", w.finish(), timeout));
    wire::Reader r(reply);
    auto st = static_cast<wire::Reply>(r.u8());
    if (st == wire::Reply::kOk && r.at_end()) return Status();
    if (st == wire::Reply::kTimeout) {
      uint32_t n = r.u32();
      std::vector<std::string> missing;
      for (uint32_t i = 0; i < n && r.ok(); ++i) missing.emplace_back(r.str());
      if (r.ok() && r.at_end()) return store::missing_keys_timeout(name_, missing, timeout);
    }
    return bad_reply("wait");
  }

  Result<bool> check(std::span<const std::string> keys) override {
    wire::Writer w;
    w.u8(op_byte(wire::Op::kCheck));
    GW_RETURN_IF_ERROR(put_keys(w, keys));
    GW_ASSIGN_OR_RETURN(auto reply, call("check", w.finish(), Nanos(0)));
    wire::Reader r(reply);
    auto st = static_cast<wire::Reply>(r.u8());
    uint8_t all = r.u8();
    if (st != wire::Reply::kOk || !r.ok() || !r.at_end()) return bad_reply("check");
    return all != 0;
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

  Status expect_ok(const char* op, const std::string& reply) {
    wire::Reader r(reply);
    if (static_cast<wire::Reply>(r.u8()) == wire::Reply::kOk && r.ok() && r.at_end())
      return Status();
    return bad_reply(op);
  }

  Status bad_reply(const char* op) const {
    return Status(Code::kProtocolError, name_ + ": malformed reply to " + op +
                                            " (is that port a gradwire store server?)");
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
        return Status(Code::kRemoteError,
                      name_ + ": cannot open a connection for " + op + ": " + what +
                          " (the store server exited? it lives in rank 0)",
                      err);
      }
      fd = std::move(*s);
      GW_RETURN_IF_ERROR(authenticate(fd, key_, host_, port_, Deadline(io_timeout_)));
    }
    Deadline deadline(store::bounded(wait) + io_timeout_);
    GW_RETURN_IF_ERROR(send_all(op, fd.get(), frame, deadline));
    std::string header(wire::kHeader, '\0');
    GW_RETURN_IF_ERROR(recv_all(op, fd.get(), header.data(), header.size(), deadline));
    auto magic = wire::get_le(header.data(), 4);
    auto len = wire::get_le(header.data() + 4, 4);
    if (magic != wire::kMagic || len > wire::kMaxFrame) return bad_reply(op);
    std::string payload(len, '\0');
    GW_RETURN_IF_ERROR(recv_all(op, fd.get(), payload.data(), len, deadline));
    std::lock_guard lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
    return payload;
  }

  Status io_error(const char* op, const char* what, int err, const Deadline& d) const {
    if (err == 0 || err == ECONNRESET || err == EPIPE) {
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
  Nanos io_timeout_;
  auth::KeyPtr key_;
  std::mutex mu_;
  std::vector<Fd> idle_;
};

}  // namespace

Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 Nanos timeout) {
  if (host.empty() || port == 0) {
    return Status(Code::kInvalidArgument,
                  "tcp store: need a host and a non-zero port to connect to, got " +
                      host_port(host, port));
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
  return std::shared_ptr<Store>(std::make_shared<Client>(host, port, io_timeout, std::move(key),
                                                            std::move(fd)));
}

}  // namespace gw
