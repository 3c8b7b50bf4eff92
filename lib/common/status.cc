#include <cstring>

#include "gw_status.h"

namespace gw {

const char* code_name(Code c) noexcept {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kNotSupported:
      return "NotSupported";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kTimeout:
      return "Timeout";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
    case Code::kRemoteError:
      return "RemoteError";
    case Code::kProtocolError:
      return "ProtocolError";
    case Code::kSystemError:
      return "SystemError";
    case Code::kInternal:
      return "Internal";
    case Code::kAborted:
      return "Aborted";
  }
  return "Unknown";
}

Status::Status(Code code, std::string message, int sys_errno) {
  if (code == Code::kOk) return;
  if (sys_errno != 0) {
    message += ": ";
    message += std::strerror(sys_errno);
  }
  rep_ = std::make_shared<const Rep>(Rep{code, sys_errno, std::move(message), -1});
}

std::string_view Status::message() const noexcept {
  return rep_ ? std::string_view(rep_->message) : std::string_view();
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(code_name(rep_->code)) + ": " + rep_->message;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  Status s;
  s.rep_ = std::make_shared<const Rep>(
      Rep{rep_->code, rep_->sys_errno, std::string(context) + ": " + rep_->message, rep_->rank});
  return s;
}

Status Status::with_rank(int rank) const {
  if (ok()) return *this;
  Status s;
  s.rep_ = std::make_shared<const Rep>(Rep{rep_->code, rep_->sys_errno, rep_->message, rank});
  return s;
}

}  // namespace gw
