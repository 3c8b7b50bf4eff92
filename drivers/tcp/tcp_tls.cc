// TLS 1.3 with the job's key as external PSK (tcp_tls.h).
#include "tcp_tls.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace gw::drv::tcp {
namespace {

constexpr char kLabel[] = "gradwire tcp tls 1.3 psk v1";
constexpr unsigned char kIdentity[] = "gradwire";
// TLS_AES_128_GCM_SHA256: the PSK's hash must be the suite's; one suite keeps them equal.
constexpr unsigned char kSuite[] = {0x13, 0x01};

std::string ssl_error_text(unsigned long e) {
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// The session that carries the PSK (both sides build the same one).
SSL_SESSION* psk_session(SSL* ssl) {
  auto* tls = static_cast<const TlsContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  const SSL_CIPHER* c = SSL_CIPHER_find(ssl, kSuite);
  SSL_SESSION* s = SSL_SESSION_new();
  if (!c || !s || !SSL_SESSION_set1_master_key(s, tls->psk(), 32) ||
      !SSL_SESSION_set_cipher(s, c) || !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen,
            SSL_SESSION** sess) {
  SSL_SESSION* s = psk_session(ssl);
  if (!s) return 0;
  if (md && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
    SSL_SESSION_free(s);  // a second round for another hash: this PSK has only SHA-256
    *sess = nullptr;
    return 1;
  }
  *id = kIdentity;
  *idlen = sizeof(kIdentity) - 1;
  *sess = s;
  return 1;
}

int find_psk(SSL* ssl, const unsigned char* id, size_t idlen, SSL_SESSION** sess) {
  if (idlen != sizeof(kIdentity) - 1 || std::memcmp(id, kIdentity, idlen) != 0) {
    *sess = nullptr;  // unknown identity: the handshake fails
    return 1;
  }
  *sess = psk_session(ssl);
  return *sess ? 1 : 0;
}

TlsIo classify(SSL* s, int r, std::string* err) {
  switch (SSL_get_error(s, r)) {
    case SSL_ERROR_WANT_READ:
      return TlsIo::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsIo::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return TlsIo::kClosed;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0 && (errno == 0 || errno == EAGAIN)) {
        ERR_clear_error();
        return errno == EAGAIN ? TlsIo::kWantRead : TlsIo::kClosed;
      }
      *err = ERR_peek_error() ? ssl_error_text(ERR_get_error())
                              : std::string("socket error: ") + std::strerror(errno);
      ERR_clear_error();
      return TlsIo::kError;
    default: {
      const unsigned long e = ERR_get_error();
      *err = e ? ssl_error_text(e) : std::string("TLS failure");
      ERR_clear_error();
      return TlsIo::kError;
    }
  }
}

}  // namespace

void SslFree::operator()(ssl_st* s) const { SSL_free(s); }

Result<std::unique_ptr<TlsContext>> TlsContext::make(const auth::KeyPtr& key) {
  if (!key) {
    return Status(Code::kInvalidArgument,
                  "tcp: tcp.tls=on needs the job's key (GW_AUTH_KEY or GW_AUTH_KEY_FILE) on "
                  "every rank: TLS uses it as its pre-shared key");
  }
  std::unique_ptr<TlsContext> t(new TlsContext());
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()),
            reinterpret_cast<const unsigned char*>(kLabel), sizeof(kLabel) - 1, t->psk_, &n) ||
      n != sizeof(t->psk_)) {
    return Status(Code::kInternal, "tcp: deriving the TLS key failed");
  }
  t->ctx_ = SSL_CTX_new(TLS_method());
  if (!t->ctx_)
    return Status(Code::kInternal, "tcp: SSL_CTX_new: " + ssl_error_text(ERR_get_error()));
  SSL_CTX_set_min_proto_version(t->ctx_, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(t->ctx_, TLS1_3_VERSION);
  if (SSL_CTX_set_ciphersuites(t->ctx_, "TLS_AES_128_GCM_SHA256") != 1)
    return Status(Code::kInternal, "tcp: no TLS_AES_128_GCM_SHA256 in this OpenSSL");
  SSL_CTX_set_mode(t->ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // No tickets (every stream is a fresh PSK handshake), EOF without close_notify is a close.
  SSL_CTX_set_options(t->ctx_,
                      SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_ENABLE_KTLS);
  SSL_CTX_set_num_tickets(t->ctx_, 0);
  SSL_CTX_set_app_data(t->ctx_, t.get());
  SSL_CTX_set_psk_use_session_callback(t->ctx_, use_psk);
  SSL_CTX_set_psk_find_session_callback(t->ctx_, find_psk);
  return t;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<SslPtr> TlsContext::wrap(int fd, bool client) const {
  SslPtr s(SSL_new(ctx_));
  if (!s || SSL_set_fd(s.get(), fd) != 1)
    return Status(Code::kInternal, "tcp: SSL_new/SSL_set_fd: " + ssl_error_text(ERR_get_error()));
  if (client)
    SSL_set_connect_state(s.get());
  else
    SSL_set_accept_state(s.get());
  return s;
}

TlsIo tls_handshake(ssl_st* s, std::string* err) {
  ERR_clear_error();
  const int r = SSL_do_handshake(s);
  if (r == 1) return TlsIo::kOk;
  return classify(s, r, err);
}

TlsIo tls_write(ssl_st* s, const iovec* iov, int niov, uint8_t* pack, size_t cap, size_t* wrote,
                std::string* err) {
  *wrote = 0;
  int i = 0;
  while (i < niov) {
    const uint8_t* p;
    size_t len;
    if (iov[i].iov_len >= cap) {
      p = static_cast<const uint8_t*>(iov[i].iov_base);
      len = std::min<size_t>(iov[i].iov_len, INT_MAX);
      ++i;
    } else {
      len = 0;
      for (; i < niov && len + iov[i].iov_len <= cap; ++i) {
        std::memcpy(pack + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
      }
      p = pack;
    }
    // Partial-write mode returns after each record, with room left in the socket: go on
    // until OpenSSL says the socket is full (only then will an EPOLLOUT edge come).
    for (size_t off = 0; off < len;) {
      ERR_clear_error();
      const int r = SSL_write(s, p + off, static_cast<int>(len - off));
      if (r <= 0) {
        const TlsIo io = classify(s, r, err);
        return io == TlsIo::kClosed ? TlsIo::kError : io;
      }
      off += static_cast<size_t>(r);
      *wrote += static_cast<size_t>(r);
    }
  }
  return TlsIo::kOk;
}

TlsIo tls_read(ssl_st* s, void* dst, size_t n, size_t* got, std::string* err) {
  *got = 0;
  ERR_clear_error();
  const int r = SSL_read(s, dst, static_cast<int>(std::min<size_t>(n, INT_MAX)));
  if (r > 0) {
    *got = static_cast<size_t>(r);
    return TlsIo::kOk;
  }
  return classify(s, r, err);
}

bool tls_kernel_offload(ssl_st* s) { return BIO_get_ktls_send(SSL_get_wbio(s)) != 0; }

}  // namespace gw::drv::tcp
