/// @file gw_auth.h
/// Authenticated peers (issue 24): a shared secret turns on an HMAC-SHA256 challenge-response
/// on every connection set-up (store, tcp and rdma through core::HelloListener). Setup paths
/// only; nothing here runs on a data path.
///
/// Exchange, always run so that a one-sided key is refused clearly instead of hanging:
///   client -> server  driver hello, then ClientHello {magic, version, has_key, nonce_c}
///   server -> client  ServerHello {magic, version, has_key, verdict, nonce_s, mac_s}
///   (both keyed) client -> server  mac_c;  server -> client  Verdict {ok | refused}
/// mac_s = HMAC(key, "s" ctx nonce_c nonce_s hello), mac_c likewise with "c": each side proves
/// the key over the other's fresh nonce, and the hello cannot be swapped underneath.
///
/// The key: env GW_AUTH_KEY, or GW_AUTH_KEY_FILE naming a file only its owner may read (mode
/// 0600). Read once per process; never logged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gw_status.h"
#include "gw_time.h"

namespace gw::auth {

inline constexpr size_t kNonce = 32;
inline constexpr size_t kMac = 32;
inline constexpr size_t kClientHello = 8 + kNonce;
inline constexpr size_t kServerHello = 8 + kNonce + kMac;
inline constexpr size_t kVerdict = 4;
/// What every refusal says to do.
inline constexpr const char* kFix = "set GW_AUTH_KEY to the job's key on every rank";

/// The job's key; null when none is configured (authentication off).
using KeyPtr = std::shared_ptr<const std::string>;

/// The process's key, read from the environment on first use.
/// @return InvalidArgument (empty key, both variables set, key file open to group/others,
///         empty or unreadable key file: the message says what to do).
Result<KeyPtr> process_key();
/// Tests only: forget the key so the next process_key() reads the environment again.
void reload_key_for_test();
/// Tests only: make `key` (null: none) the process key without touching the environment
/// (setenv while other threads call getenv is a crash).
void set_key_for_test(const char* key);

/// Writes the kClientHello bytes of a peer without a key (also for tests and fuzz targets).
void keyless_hello(uint8_t* out);
/// Whether `n` bytes received so far may start a ClientHello (false: drop the peer at once).
bool plausible_hello(const uint8_t* in, size_t n);

/// The server half, without I/O: the caller reads and writes the bytes.
class Server {
 public:
  enum class Next { kAccept, kProof, kRefuse };
  /// `ctx` names the protocol (driver); `hello` is the driver's hello, bound into the MACs.
  Server(KeyPtr key, std::string_view ctx, const uint8_t* hello, size_t n);
  /// @param in kClientHello bytes. @param out kServerHello bytes to send, whatever Next is.
  Next on_hello(const uint8_t* in, uint8_t* out);
  /// @param in kMac bytes. @param out kVerdict bytes to send.
  Next on_proof(const uint8_t* in, uint8_t* out);
  /// Why the last step refused.
  const char* why() const { return why_; }

 private:
  KeyPtr key_;
  std::string transcript_;  // ctx, nonce_c, nonce_s, hello
  const char* why_ = "";
};

/// The client half, without I/O.
class Client {
 public:
  /// `who` names the server in errors.
  Client(KeyPtr key, std::string_view ctx, const void* hello, size_t n, std::string who);
  /// The kClientHello bytes to send after the driver's hello.
  const uint8_t* hello() const { return hello_; }
  /// @param in kServerHello bytes. @param proof kMac bytes to send when *send_proof (then the
  /// verdict follows). @return Unavailable (refused, or the server's proof is wrong: the
  /// proof still goes out, so the server logs the refusal too) or ProtocolError.
  Status on_server_hello(const uint8_t* in, uint8_t* proof, bool* send_proof);
  /// @param in kVerdict bytes. @return Unavailable if the server refused the proof.
  Status on_verdict(const uint8_t* in) const;

 private:
  KeyPtr key_;
  std::string who_, failed_;
  std::string transcript_;  // nonce_c, (nonce_s,) ctx, hello
  uint8_t hello_[kClientHello];
};

/// The client half on a connected socket: sends `hello` followed by the ClientHello and runs
/// the exchange. While it waits, `idle` (if set) is called every millisecond or so, so that
/// a rank dialling a peer that dials it back keeps answering (no deadlock).
/// @return Unavailable (refused: wrong or missing key on either side, or closed), Timeout,
///         SystemError; messages name `who` and say what to do.
Status client_handshake(int fd, const KeyPtr& key, std::string_view ctx, const void* hello,
                        size_t n, const std::string& who, Deadline deadline,
                        const std::function<Status()>& idle = {});

}  // namespace gw::auth
