// The health query's socket thread (health_server.h).
#include "health_server.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "gw_socket.h"

namespace gw::coll {
namespace {

Status health_error(const std::string& what) {
  const int e = errno;
  return Status(Code::kSystemError, what + ": " + errno_text(e), e);
}

}  // namespace

Result<std::unique_ptr<HealthServer>> HealthServer::start(std::string name, Answer answer,
                                                          Tick tick, int tick_ms) {
  std::unique_ptr<HealthServer> s(new HealthServer());
  s->name_ = std::move(name);
  s->answer_ = std::move(answer);
  s->tick_ = std::move(tick);
  s->tick_ms_ = s->tick_ && tick_ms > 0 ? tick_ms : -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (s->name_.size() + 1 > sizeof(a.sun_path))
    return Status(Code::kInvalidArgument, "coll: health socket name too long: " + s->name_);
  std::memcpy(a.sun_path + 1, s->name_.data(), s->name_.size());  // abstract: leading NUL
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + s->name_.size());
  s->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listen_fd_ < 0) return health_error("coll: health socket");
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
      listen(s->listen_fd_, 16) != 0)
    return health_error("coll: health socket @" + s->name_);
  s->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (s->stop_fd_ < 0) return health_error("coll: health socket's eventfd");
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

HealthServer::~HealthServer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) != sizeof(one)) {
      // An eventfd write fails only on overflow: the thread has been told already.
    }
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void HealthServer::run() {
  pthread_setname_np(pthread_self(), "gw-health");
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  if (tick_ms_ > 0) tick_();
  auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
  for (;;) {
    int wait = -1;
    if (tick_ms_ > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          next - std::chrono::steady_clock::now());
      wait = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    const int k = poll(fds, 2, wait);
    if (k < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (tick_ms_ > 0 && std::chrono::steady_clock::now() >= next) {
      tick_();
      next = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
    }
    if (k <= 0) continue;
    if (!(fds[0].revents & POLLIN)) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) serve(fd);
  }
}

void HealthServer::serve(int fd) {
  // A client that does not read cannot hold the thread: 1 s to take the answer.
  const timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const std::string s = answer_();
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  close(fd);
}

}  // namespace gw::coll
