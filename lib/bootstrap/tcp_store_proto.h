/// @file tcp_store_proto.h
/// Wire format of the TCP store (internal). Every frame: magic "GWS1" (4 bytes), payload
/// length (u32 little-endian), payload. Request payload: op (u8) then fields; reply payload:
/// status (u8) then fields. Fields: str = u32 length + bytes, i64 = 8 bytes little-endian,
/// u32 = 4 bytes little-endian.
///   SET   key:str value:str            -> OK
///   GET   key:str timeout_ms:i64       -> OK value:str | TIMEOUT
///   ADD   key:str delta:i64            -> OK value:i64 | ERROR message:str
///   WAIT  timeout_ms:i64 n:u32 key:str*n -> OK | TIMEOUT n:u32 missing:str*n
///   CHECK n:u32 key:str*n              -> OK all_present:u8
///   HELLO rank:u32                     -> OK      (makes this connection rank's session)
///   BYE                                -> nothing (the session ends normally; close follows)
/// A GET or WAIT that cannot be satisfied once a rank has left answers
///   LEFT rank:u32 n:u32 missing:str*n
/// Rank liveness: a launched rank's client keeps one session connection, opened with HELLO and
/// used for nothing else. If it closes without a BYE before (the process was killed or
/// crashed), the server records that rank as left (the first such rank, sticky) and answers
/// LEFT to every parked and later GET/WAIT whose keys are missing: the others learn who within
/// a poll round instead of at their timeout. Every rank of a job runs the same build, so no
/// version negotiation: an older server drops a HELLO as malformed.
/// Lengths are bounded (kMaxItem per string, kMaxFrame per frame); anything else is malformed.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "store_util.h"

namespace gw::store::wire {

inline constexpr uint32_t kMagic = 0x31535747;  // "GWS1" read as little-endian
inline constexpr size_t kHeader = 8;
inline constexpr size_t kMaxFrame = 2 * kMaxItem + 64;

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kWait = 4,
  kCheck = 5,
  kHello = 6,
  kBye = 7
};
enum class Reply : uint8_t { kOk = 0, kTimeout = 1, kError = 2, kLeft = 3 };
/// Largest rank a HELLO may name (Group's size limit).
inline constexpr uint32_t kMaxRank = (1u << 16) - 1;

/// Appends fields to a frame; finish() fills in the header.
class Writer {
 public:
  Writer() : buf_(kHeader, '\0') {}
  Writer& u8(uint8_t v) {
    buf_.push_back(static_cast<char>(v));
    return *this;
  }
  Writer& u32(uint32_t v) { return le(v, 4); }
  Writer& i64(int64_t v) { return le(static_cast<uint64_t>(v), 8); }
  Writer& str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_.append(s);
    return *this;
  }
  std::string finish() {  // moves the frame out; the Writer is spent
    put_le(buf_.data(), kMagic, 4);
    put_le(buf_.data() + 4, buf_.size() - kHeader, 4);
    return std::move(buf_);
  }
  static void put_le(char* p, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<char>(v >> (8 * i));
  }

 private:
  Writer& le(uint64_t v, int n) {
    char b[8];
    put_le(b, v, n);
    buf_.append(b, static_cast<size_t>(n));
    return *this;
  }
  std::string buf_;
};

inline uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

/// Reads fields from a payload; any overrun or oversized string sets !ok() and returns zeros.
class Reader {
 public:
  explicit Reader(std::string_view payload) : p_(payload) {}
  bool ok() const { return ok_; }
  bool at_end() const { return p_.empty(); }
  uint8_t u8() { return static_cast<uint8_t>(take(1)); }
  uint32_t u32() { return static_cast<uint32_t>(take(4)); }
  int64_t i64() { return static_cast<int64_t>(take(8)); }
  std::string_view str() {
    uint32_t n = u32();
    if (!ok_ || n > kMaxItem || n > p_.size()) {
      ok_ = false;
      return {};
    }
    auto s = p_.substr(0, n);
    p_.remove_prefix(n);
    return s;
  }

 private:
  uint64_t take(int n) {
    if (!ok_ || p_.size() < static_cast<size_t>(n)) {
      ok_ = false;
      return 0;
    }
    uint64_t v = get_le(p_.data(), n);
    p_.remove_prefix(static_cast<size_t>(n));
    return v;
  }
  std::string_view p_;
  bool ok_ = true;
};

}  // namespace gw::store::wire
