// Authenticated peers: the key, and both halves of the challenge-response (gw_auth.h).
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gw_auth.h"
#include "gw_socket.h"

namespace gw::auth {
namespace {

constexpr uint32_t kMagic = 0x31415747;  // "GWA1"
constexpr uint8_t kVersion = 1;
constexpr uint32_t kOk = 0x4b4f4b4f, kRefused = 0x46455246;
// ServerHello verdicts: the server goes on to the proof, takes the peer, or refuses it.
enum : uint8_t { kGoOn = 0, kTaken = 1, kNeedKey = 2, kHaveNoKey = 3 };
constexpr size_t kMaxKeyFile = 4096;

std::mutex g_mu;
bool g_read = false;
Status g_err;
KeyPtr g_key;

Result<KeyPtr> read_key_file(const char* path) {
  const std::string p = path;
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return Status(Code::kInvalidArgument,
                  "auth: cannot read GW_AUTH_KEY_FILE " + p + ": " + errno_text(errno), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status(Code::kInvalidArgument, "auth: GW_AUTH_KEY_FILE " + p + " is not a file");
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status(Code::kInvalidArgument, "auth: key file " + p + " has mode " + mode +
                                              ": group or others may read it; run chmod 600 " + p);
  }
  std::string key(kMaxKeyFile + 1, '\0');
  ssize_t n = ::read(fd.get(), key.data(), key.size());
  if (n < 0)
    return Status(Code::kInvalidArgument,
                  "auth: cannot read key file " + p + ": " + errno_text(errno), errno);
  key.resize(static_cast<size_t>(n));
  if (key.size() > kMaxKeyFile)
    return Status(Code::kInvalidArgument, "auth: key file " + p + " is over 4096 bytes");
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.empty())
    return Status(Code::kInvalidArgument, "auth: key file " + p +
                                              " is empty; put the job's "
                                              "key in it (e.g. openssl rand -hex 32 > " +
                                              p + ")");
  return std::make_shared<const std::string>(std::move(key));
}

Result<KeyPtr> read_key() {
  const char* env = std::getenv("GW_AUTH_KEY");
  const char* file = std::getenv("GW_AUTH_KEY_FILE");
  if (env && file)
    return Status(Code::kInvalidArgument,
                  "auth: both GW_AUTH_KEY and GW_AUTH_KEY_FILE are set; set only one");
  if (file) return read_key_file(file);
  if (!env) return KeyPtr();
  if (!*env)
    return Status(Code::kInvalidArgument,
                  "auth: GW_AUTH_KEY is set but empty; unset it or "
                  "give the job's key");
  return std::make_shared<const std::string>(env);
}

void mac(const KeyPtr& key, char label, const std::string& transcript, uint8_t* out) {
  std::string msg = label + transcript;
  unsigned len = kMac;
  HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()),
       reinterpret_cast<const uint8_t*>(msg.data()), msg.size(), out, &len);
  OPENSSL_cleanse(msg.data(), msg.size());
}

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

Result<KeyPtr> process_key() {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_read) {
    auto k = read_key();
    g_read = true;
    if (k.ok())
      g_key = *k;
    else
      g_err = k.status();
  }
  if (!g_err.ok()) return g_err;
  return g_key;
}

void reload_key_for_test() {
  std::lock_guard<std::mutex> g(g_mu);
  g_read = false;
  g_err = Status();
  g_key.reset();
}

void set_key_for_test(const char* key) {
  std::lock_guard<std::mutex> g(g_mu);
  g_read = true;
  g_err = Status();
  g_key = key ? std::make_shared<const std::string>(key) : nullptr;
}

void keyless_hello(uint8_t* out) {
  std::memset(out, 0, kClientHello);
  put32(out, kMagic);
  out[4] = kVersion;
}

bool plausible_hello(const uint8_t* in, size_t n) {
  uint8_t m[4];
  put32(m, kMagic);
  return std::memcmp(in, m, std::min<size_t>(n, 4)) == 0;
}

Server::Server(KeyPtr key, std::string_view ctx, const uint8_t* hello, size_t n)
    : key_(std::move(key)) {
  transcript_.assign(ctx);
  transcript_.append(reinterpret_cast<const char*>(hello), n);
}

Server::Next Server::on_hello(const uint8_t* in, uint8_t* out) {
  std::memset(out, 0, kServerHello);
  put32(out, kMagic);
  out[4] = kVersion;
  out[5] = key_ != nullptr;
  if (get32(in) != kMagic || in[4] != kVersion) {
    why_ = "no authentication block after the hello (a gradwire peer of another version?)";
    out[6] = kNeedKey;
    return Next::kRefuse;
  }
  const bool peer_keyed = in[5] != 0;
  if (!key_ && !peer_keyed) {
    out[6] = kTaken;
    return Next::kAccept;
  }
  if (!key_ || !peer_keyed) {
    why_ = key_ ? "authentication failed: wrong or missing key (the peer has none); set "
                  "GW_AUTH_KEY to the job's key on every rank"
                : "authentication failed: the peer has a key but this rank has none; set "
                  "GW_AUTH_KEY to the job's key on every rank";
    out[6] = key_ ? kNeedKey : kHaveNoKey;
    return Next::kRefuse;
  }
  uint8_t nonce_s[kNonce];
  RAND_bytes(nonce_s, kNonce);
  // transcript_ becomes nonce_c nonce_s ctx hello, as the client builds it.
  transcript_.insert(0, reinterpret_cast<const char*>(nonce_s), kNonce);
  transcript_.insert(0, reinterpret_cast<const char*>(in + 8), kNonce);
  out[6] = kGoOn;
  std::memcpy(out + 8, nonce_s, kNonce);
  mac(key_, 's', transcript_, out + 8 + kNonce);
  return Next::kProof;
}

Server::Next Server::on_proof(const uint8_t* in, uint8_t* out) {
  uint8_t want[kMac];
  mac(key_, 'c', transcript_, want);
  const bool ok = CRYPTO_memcmp(want, in, kMac) == 0;
  put32(out, ok ? kOk : kRefused);
  if (ok) return Next::kAccept;
  why_ =
      "authentication failed: wrong or missing key (the peer's proof does not match); set "
      "GW_AUTH_KEY to the job's key on every rank";
  return Next::kRefuse;
}

namespace {

// Reads exactly n bytes, calling idle between polls.
Status read_exact(int fd, uint8_t* buf, size_t n, const std::string& pre, Deadline deadline,
                  const std::function<Status()>& idle) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, buf + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR))
      return Status(Code::kUnavailable, pre +
                                            "closed the connection during authentication "
                                            "(it refused this rank; see its log)");
    if (deadline.expired())
      return Status(Code::kTimeout, pre + "did not answer the authentication in time");
    if (idle) GW_RETURN_IF_ERROR(idle());
    pollfd pf{fd, POLLIN, 0};
    ::poll(&pf, 1, std::min(idle ? 1 : 100, deadline.remaining_ms()));
  }
  return Status();
}

}  // namespace

Client::Client(KeyPtr key, std::string_view ctx, const void* hello, size_t n, std::string who)
    : key_(std::move(key)), who_(std::move(who)) {
  keyless_hello(hello_);
  hello_[5] = key_ != nullptr;
  if (key_) RAND_bytes(hello_ + 8, kNonce);
  transcript_.assign(reinterpret_cast<const char*>(hello_ + 8), kNonce);
  transcript_.append(ctx);
  transcript_.append(static_cast<const char*>(hello), n);
  failed_ = std::string(ctx) + ": authentication with " + who_ + " failed: ";
}

Status Client::on_server_hello(const uint8_t* in, uint8_t* proof, bool* send_proof) {
  *send_proof = false;
  if (get32(in) != kMagic || in[4] != kVersion)
    return Status(Code::kProtocolError, failed_ +
                                            "it answered with no authentication block "
                                            "(a gradwire peer of another version?)");
  switch (in[6]) {
    case kTaken:
      return Status();
    case kNeedKey:
      return Status(Code::kUnavailable, failed_ + "wrong or missing key (it requires a key and " +
                                            (key_ ? "refused this rank's" : "this rank has none") +
                                            "); " + kFix);
    case kHaveNoKey:
      return Status(Code::kUnavailable,
                    failed_ + "this rank has a key but the peer has none; " + kFix);
    case kGoOn:
      break;
    default:
      return Status(Code::kProtocolError, failed_ + "unknown authentication verdict");
  }
  if (!key_)  // a server asking a keyless client for a proof: not ours
    return Status(Code::kProtocolError, failed_ + "asked for a proof of a key this rank has not");
  transcript_.insert(kNonce, reinterpret_cast<const char*>(in + 8), kNonce);
  uint8_t want[kMac];
  mac(key_, 's', transcript_, want);
  mac(key_, 'c', transcript_, proof);
  // The proof goes out even when the server's did not match: it then logs the refusal too.
  *send_proof = true;
  if (CRYPTO_memcmp(want, in + 8 + kNonce, kMac) != 0)
    return Status(Code::kUnavailable,
                  failed_ + "wrong or missing key (the peer's proof does not match); " + kFix);
  return Status();
}

Status Client::on_verdict(const uint8_t* in) const {
  if (get32(in) == kOk) return Status();
  return Status(Code::kUnavailable,
                failed_ + "wrong or missing key (the peer refused this rank's proof); " + kFix);
}

Status client_handshake(int fd, const KeyPtr& key, std::string_view ctx, const void* hello,
                        size_t n, const std::string& who, Deadline deadline,
                        const std::function<Status()>& idle) {
  const std::string pre = std::string(ctx) + ": " + who + " ";
  Client c(key, ctx, hello, n, who);
  std::string first(static_cast<const char*>(hello), n);
  first.append(reinterpret_cast<const char*>(c.hello()), kClientHello);
  GW_RETURN_IF_ERROR(write_all(fd, first.data(), first.size(), deadline));
  uint8_t sh[kServerHello], proof[kMac], verdict[kVerdict];
  GW_RETURN_IF_ERROR(read_exact(fd, sh, sizeof sh, pre, deadline, idle));
  bool send_proof;
  Status st = c.on_server_hello(sh, proof, &send_proof);
  if (send_proof) GW_RETURN_IF_ERROR(write_all(fd, proof, sizeof proof, deadline));
  if (!st.ok() || !send_proof) return st;
  GW_RETURN_IF_ERROR(read_exact(fd, verdict, sizeof verdict, pre, deadline, idle));
  return c.on_verdict(verdict);
}

}  // namespace gw::auth
