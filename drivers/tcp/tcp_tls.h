/// @file tcp_tls.h
/// Optional TLS 1.3 on the tcp transport's streams (tcp.tls=on, OpenSSL).
///
/// The job's shared key (GW_AUTH_KEY / GW_AUTH_KEY_FILE) is TLS's external pre-shared key
/// (derived: HMAC-SHA256(key, label)), used with (EC)DHE, so sessions have forward secrecy and
/// no certificate has to be made or handed out; the key's challenge on set-up runs first, as
/// without TLS. Each stream's handshake runs in the data path, driven by epoll like the data,
/// so connect() never blocks on it (a rank dialling a peer that is itself busy dialling others
/// cannot deadlock). OpenSSL's kernel TLS offload is asked for (SSL_OP_ENABLE_KTLS); it takes
/// effect only where both the kernel (tls module) and the OpenSSL build have it.
/// Thread-safety: a context may be shared; each Ssl belongs to one stream (one thread).
#pragma once

#include <sys/uio.h>

#include <memory>
#include <string>

#include "gw_auth.h"
#include "gw_status.h"

struct ssl_ctx_st;
struct ssl_st;

namespace gw::drv::tcp {

struct SslFree {
  void operator()(ssl_st* s) const;
};
using SslPtr = std::unique_ptr<ssl_st, SslFree>;

/// What one TLS call did.
enum class TlsIo { kOk, kWantRead, kWantWrite, kClosed, kError };

class TlsContext {
 public:
  /// @return InvalidArgument without a key (TLS here is keyed by the job's key).
  static Result<std::unique_ptr<TlsContext>> make(const auth::KeyPtr& key);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  /// A TLS session over a connected socket; `client`: the dialling side.
  Result<SslPtr> wrap(int fd, bool client) const;

  const unsigned char* psk() const { return psk_; }

 private:
  TlsContext() = default;
  ssl_ctx_st* ctx_ = nullptr;
  unsigned char psk_[32] = {};
};

/// One step of the handshake; kOk once it is done, kClosed if the peer left (a FIN).
/// `err` gets the reason of kError.
TlsIo tls_handshake(ssl_st* s, std::string* err);
/// Writes the iov parts in order: small parts are packed into `pack` (`cap` bytes) so that
/// a header and a small payload make one record and one syscall. After kWantWrite, call
/// again with the same unsent bytes first (the data path does: it only advances by `*wrote`).
TlsIo tls_write(ssl_st* s, const iovec* iov, int niov, uint8_t* pack, size_t cap, size_t* wrote,
                std::string* err);
/// Reads up to n bytes; kOk with *got > 0, else why nothing came.
TlsIo tls_read(ssl_st* s, void* dst, size_t n, size_t* got, std::string* err);
/// Whether the kernel carries this session's records (kTLS send offload).
bool tls_kernel_offload(ssl_st* s);

}  // namespace gw::drv::tcp
