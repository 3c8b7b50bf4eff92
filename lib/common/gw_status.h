/// @file gw_status.h
/// Status and Result<T>: how every gradwire call reports failure. No exception crosses the
/// public API. An OK Status holds no allocation; an error holds a shared immutable record, so
/// copying a sticky error into many completions is cheap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gw {

/// Standard error codes (see DESIGN.md).
enum class Code : uint8_t {
  kOk = 0,
  kInvalidArgument,    ///< caller passed something wrong (size, key, pointer)
  kNotSupported,       ///< the transport or build cannot do this
  kUnavailable,        ///< a device, driver or peer is not there (yet)
  kTimeout,            ///< a deadline passed
  kResourceExhausted,  ///< a bounded queue, pool or memory limit is full
  kRemoteError,        ///< the peer failed, closed or reset
  kProtocolError,      ///< malformed or unexpected data on the wire
  kSystemError,        ///< a system call failed; errno is kept
  kInternal,           ///< a bug in gradwire
  kAborted,            ///< a rank aborted the communicator (Communicator::abort)
};

/// Name of a code, e.g. "Timeout".
const char* code_name(Code c) noexcept;

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(Code code, std::string message, int sys_errno = 0);

  static Status ok_status() noexcept { return Status(); }

  bool ok() const noexcept { return rep_ == nullptr; }
  Code code() const noexcept { return rep_ ? rep_->code : Code::kOk; }
  int sys_errno() const noexcept { return rep_ ? rep_->sys_errno : 0; }
  std::string_view message() const noexcept;
  /// "Timeout: <message>" or "OK".
  std::string to_string() const;
  /// A copy with "context: " put before the message; OK stays OK.
  Status with_context(std::string_view context) const;
  /// The rank at fault (the peer that failed, stopped or aborted), or -1 when unknown or not
  /// about a peer. Kept by with_context().
  int rank() const noexcept { return rep_ ? rep_->rank : -1; }
  /// A copy naming `rank` as the one at fault; OK stays OK.
  Status with_rank(int rank) const;

 private:
  struct Rep {
    Code code;
    int sys_errno;
    std::string message;
    int rank = -1;
  };
  std::shared_ptr<const Rep> rep_;
};

/// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(Code::kInternal, "Result built from OK status");
  }

  bool ok() const noexcept { return v_.index() == 0; }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gw

#define GW_CONCAT_INNER_(a, b) a##b
#define GW_CONCAT_(a, b) GW_CONCAT_INNER_(a, b)

/// Return the Status of `expr` from the enclosing function if it is an error.
#define GW_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::gw::Status gw_status_ = (expr);        \
    if (!gw_status_.ok()) return gw_status_; \
  } while (0)

/// `lhs = value of expr`, or return its Status from the enclosing function.
#define GW_ASSIGN_OR_RETURN(lhs, expr) \
  GW_ASSIGN_OR_RETURN_IMPL_(GW_CONCAT_(gw_result_, __LINE__), lhs, expr)
#define GW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
