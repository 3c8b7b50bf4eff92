/// @file tcp_store_core.h
/// The TCP store server's request handling without its sockets (internal): the state of the
/// store (keys, sessions, the rank that left) and what each client's received bytes do to it.
/// TcpStoreServer (tcp_store_server.cc) does the I/O around it: accepts, reads into
/// received(), flushes each client's `out`, expires waits; fuzz_store_core feeds bytes
/// straight in. Thread-safety: none (the server's one thread).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gw_auth.h"
#include "gw_socket.h"
#include "gw_time.h"
#include "log.h"
#include "tcp_store_proto.h"

namespace gw::store {

/// Longest wait a GET or WAIT may ask for (longer ones are cut to it).
inline constexpr int64_t kMaxWaitMs = int64_t{24} * 3600 * 1000;

struct Client {
  Fd fd;  // unused by StoreCore but closed by drop()
  std::string peer;
  std::string in;  // bytes received, not yet handled, from in_off on
  size_t in_off = 0;
  std::string out;  // reply bytes not yet sent, from out_off on
  size_t out_off = 0;
  bool closed = false;
  // The key's challenge-response runs before any request: null once it passed.
  std::unique_ptr<auth::Server> auth;
  bool proof_due = false;  // the ClientHello was answered; the proof comes next
  int rank = -1;           // the rank whose session this is (HELLO), else -1
  bool bye = false;        // the session said goodbye: its close is normal
  // A parked GET/WAIT: keys[next..] may still be missing.
  bool waiting = false;
  wire::Op wait_op = wire::Op::kGet;
  std::vector<std::string> keys;
  size_t next = 0;
  Clock::time_point deadline;
};

class StoreCore {
 public:
  StoreCore(std::string where, auth::KeyPtr key) : where_(std::move(where)), key_(std::move(key)) {}
  virtual ~StoreCore() = default;

  /// A new client (its authentication comes first); the reference lives until sweep().
  Client& add_client(Fd fd, std::string peer);
  /// Bytes read from c: appended to its input (a client that sends more than one maximal
  /// frame while its request is pending is dropped). handle_frames() acts on them.
  void received(Client& c, std::string_view bytes);
  /// Handles c's complete frames while its replies are out and it is not parked.
  void handle_frames(Client& c);
  /// Answers the parked waits whose deadline is at or before `now`.
  void expire(Clock::time_point now);
  /// c's connection ended (EOF or error): closes it as the server does.
  void hang_up(Client& c) { drop(c, ""); }
  /// Forgets closed clients.
  void sweep();
  const std::vector<std::unique_ptr<Client>>& clients() const { return clients_; }
  const std::string& where() const { return where_; }

 protected:
  /// Sends what it can of c.out (from out_off); may drop(c). The server writes to the socket.
  virtual void flush(Client& c) = 0;
  /// A refusal's few bytes, sent once before c is closed (whole or not at all).
  virtual void send_last(Client& c, const uint8_t* p, size_t n) = 0;
  void drop(Client& c, const std::string& why);
  std::shared_ptr<spdlog::logger> lg_ = log::get("gw.store");

 private:
  /// Runs the authentication on c's input. @return whether requests may follow now.
  bool authenticate(Client& c);
  bool handle(Client& c, std::string_view payload);  // false: malformed
  bool handle_add(Client& c, wire::Reader& r);
  // A GET or WAIT: parks the client until its keys exist, it times out or a rank leaves.
  void park(Client& c, wire::Op op, int64_t timeout_ms);
  void reply(Client& c, std::string frame);
  // Re-checks parked clients after a key changed; replies to those now satisfied.
  void wake_waiters();
  bool satisfied(Client& c);
  enum class End { kDone, kTimeout, kLeft };
  void finish_wait(Client& c, End end);
  // A session closed without a goodbye: the first such rank fails every unsatisfied waiter.
  void rank_left(int rank, const std::string& why);

  std::string where_;
  std::map<std::string, std::string, std::less<>> data_;
  std::vector<std::unique_ptr<Client>> clients_;
  int left_rank_ = -1;  // the first rank that left (sticky), else -1
  auth::KeyPtr key_;
};

}  // namespace gw::store
