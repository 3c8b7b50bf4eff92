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

Result<int> HealthServer::bind_socket(const std::string& name) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof(a.sun_path))
    return Status(Code::kInvalidArgument, "coll: health socket name too long: " + name);
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return health_error("coll: health socket");
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 16) != 0) {
    Status st = health_error("coll: health socket @" + name);
    close(fd);
    return st;
  }
  return fd;
}

Result<std::unique_ptr<HealthServer>> HealthServer::start(std::string name, Answer answer,
                                                          Tick tick, int tick_ms) {
  std::unique_ptr<HealthServer> s(new HealthServer());
  s->name_ = std::move(name);
  s->answer_ = std::move(answer);
  s->tick_ = std::move(tick);
  s->tick_ms_ = s->tick_ && tick_ms > 0 ? tick_ms : -1;
  GW_ASSIGN_OR_RETURN(s->listen_fd_, bind_socket(s->name_));
  s->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (s->stop_fd_ < 0) return health_error("coll: health socket's eventfd");
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

Status HealthServer::rebind(std::string name, Answer answer, Tick tick, int tick_ms,
                            const std::function<void()>& swap) {
  GW_ASSIGN_OR_RETURN(int fd, bind_socket(name));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (old_fd_ >= 0) close(old_fd_);  // a second rebind before the thread woke
    old_fd_ = listen_fd_;
    listen_fd_ = fd;
    name_ = std::move(name);
    answer_ = std::move(answer);
    tick_ = std::move(tick);
    tick_ms_ = tick_ && tick_ms > 0 ? tick_ms : -1;
    if (swap) swap();
  }
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) != sizeof(one)) {
    // Only on overflow: the thread has been woken already.
  }
  return Status();
}

HealthServer::~HealthServer() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    const uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) != sizeof(one)) {
      // An eventfd write fails only on overflow: the thread has been told already.
    }
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (old_fd_ >= 0) close(old_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void HealthServer::run() {
  pthread_setname_np(pthread_self(), "gw-health");
  std::unique_lock<std::mutex> l(mu_);
  if (tick_ms_ > 0) tick_();
  auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
  for (;;) {
    int wait = -1;
    if (tick_ms_ > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          next - std::chrono::steady_clock::now());
      wait = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    l.unlock();  // rebind may swap meanwhile: it wakes this poll through stop_fd_
    const int k = poll(fds, 2, wait);
    l.lock();
    if (k < 0 && errno != EINTR) return;
    if (fds[1].revents) {
      if (stopping_) return;
      uint64_t v;
      if (read(stop_fd_, &v, sizeof(v)) != sizeof(v)) {
        // Nothing to take: another wake-up read it.
      }
      if (old_fd_ >= 0) close(old_fd_);  // rebind's old socket: nobody polls it now
      old_fd_ = -1;
      next = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
      continue;
    }
    if (tick_ms_ > 0 && std::chrono::steady_clock::now() >= next) {
      tick_();
      next = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms_);
    }
    if (k <= 0) continue;
    if (!(fds[0].revents & POLLIN) || fds[0].fd != listen_fd_) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) serve(fd);  // under mu_: the answer is the current communicator's
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
