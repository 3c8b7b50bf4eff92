/// @file gw_listener.h
/// The accepting half of a driver's connection set-up, written once for tcp and rdma: a
/// listening socket; accepted connections waiting for their hello (at most kMaxPending, each
/// for at most the hello timeout); the driver's check of each hello; refusals counted and
/// logged in aggregate -- the first at once, then one line per kLogEvery at most, so a port
/// scanner cannot flood the log or stall progress in a log write. After the hello passes the
/// check, the authentication exchange of gw_auth.h runs (both halves within the hello
/// timeout); the dialling side runs auth::client_handshake with key().
/// The listener keeps an epoll set of its own: the driver adds fd() to its epoll set and
/// calls service() when it is readable, and tick() on its progress passes while needs_tick()
/// (time-outs, the summary line).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gw_auth.h"
#include "gw_socket.h"
#include "gw_time.h"

namespace spdlog {
class logger;
}

namespace gw::core {

class HelloListener {
 public:
  /// @return why the hello is refused (e.g. "wrong magic"), or null to take it.
  using Check = std::function<const char*(const uint8_t* hello)>;
  /// Takes a connection whose hello passed the check; exactly `hello_bytes` were read, what
  /// follows on `fd` is the driver's.
  using Take = std::function<void(Fd fd, const uint8_t* hello)>;
  static constexpr size_t kMaxHello = 256;
  static constexpr size_t kMaxPending = 256;
  static constexpr Millis kLogEvery{10000};

  HelloListener() = default;
  HelloListener(const HelloListener&) = delete;
  HelloListener& operator=(const HelloListener&) = delete;

  /// Listens on `at` (port 0: any; `at` gets the bound port). `driver` names it in messages.
  /// @return SystemError (bind/listen/epoll) or InvalidArgument (hello_bytes > kMaxHello, or
  ///         the key of auth::process_key() cannot be used).
  Status open(const char* driver, std::shared_ptr<spdlog::logger> log, SockAddr& at,
              size_t hello_bytes, int hello_timeout_ms, Check check, Take take);
  /// The listener's epoll set: readable when a connection or a hello's bytes wait.
  int fd() const { return epfd_.get(); }
  /// Connections wait for their hello: their bytes come through fd().
  bool has_pending() const { return !pending_.empty(); }
  bool needs_tick() const { return !pending_.empty() || !unlogged_.empty(); }
  /// Accepts, reads hellos, then tick(). Never blocks.
  void service();
  /// Drops the connections past the hello timeout; writes the summary line when due.
  void tick();
  /// A connection the driver refused after take() (e.g. a duplicate key): counted and logged
  /// like the listener's own refusals.
  void refuse(const std::string& why);
  uint64_t rejected() const { return rejected_; }
  /// Names the connection key in a hello, so that a passive connect() for a peer refused by
  /// authentication fails at once, saying why, instead of waiting out its deadline.
  void key_of(std::function<uint64_t(const uint8_t* hello)> f) { key_of_ = std::move(f); }
  /// Why the peer dialling with `key` was refused by authentication; Status() if it was not.
  /// @return Unavailable naming `who` and the reason (the refusal is forgotten).
  Status auth_refusal(uint64_t key, const std::string& who);
  /// The job's key (null: none); what the dialling side proves.
  const auth::KeyPtr& key() const { return key_; }

 private:
  struct Pending {
    Fd fd;
    std::string from;
    size_t got = 0;  // of the current stage's bytes
    int stage = 0;   // 0: the hello, 1: the ClientHello, 2: the proof
    Clock::time_point since;
    std::unique_ptr<auth::Server> auth;
    alignas(8) uint8_t hello[kMaxHello];
    uint8_t in[auth::kClientHello];
  };
  void accept_all();
  void read_hello(Pending* p);
  /// Runs the stage whose bytes are complete. @return why refused, "" to wait, null to take.
  const char* step(Pending* p);
  void expire();
  void drop(Pending* p);
  void count(const std::string& why, const std::string& from);

  const char* driver_ = "";
  std::shared_ptr<spdlog::logger> log_;
  Fd listen_fd_, epfd_;
  size_t hello_bytes_ = 0;
  Millis hello_timeout_{0};
  auth::KeyPtr key_;
  Check check_;
  Take take_;
  std::function<uint64_t(const uint8_t*)> key_of_;
  std::map<uint64_t, std::string> auth_refused_;  // by connection key, at most kMaxPending
  std::vector<std::unique_ptr<Pending>> pending_;
  uint64_t rejected_ = 0;
  // Refusals since the last log line, by reason; when that line was written.
  std::map<std::string, uint64_t> unlogged_;
  Clock::time_point logged_at_{};
  bool logged_any_ = false;
};

}  // namespace gw::core
