// HelloListener: accept, read each hello, refuse with aggregated logging (gw_listener.h).
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "gw_listener.h"
#include "log.h"

namespace gw::core {

Status HelloListener::open(const char* driver, std::shared_ptr<spdlog::logger> log,
                           SockAddr& at, size_t hello_bytes, int hello_timeout_ms, Check check,
                           Take take) {
  driver_ = driver;
  log_ = std::move(log);
  if (hello_bytes == 0 || hello_bytes > kMaxHello)
    return Status(Code::kInvalidArgument, std::string(driver) + ": hello of " +
                                              std::to_string(hello_bytes) + " bytes");
  hello_bytes_ = hello_bytes;
  hello_timeout_ = Millis(hello_timeout_ms);
  check_ = std::move(check);
  take_ = std::move(take);
  GW_ASSIGN_OR_RETURN(listen_fd_, listen_on(at, 1024));
  epfd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_) return Status(Code::kSystemError, std::string(driver) + ": epoll_create1", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // null: the listening socket
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev) != 0)
    return Status(Code::kSystemError, std::string(driver) + ": epoll_ctl(listener)", errno);
  return Status();
}

void HelloListener::service() {
  epoll_event evs[32];
  int n;
  while ((n = ::epoll_wait(epfd_.get(), evs, 32, 0)) > 0) {
    for (int i = 0; i < n; ++i) {
      auto* p = static_cast<Pending*>(evs[i].data.ptr);
      if (!p) {
        accept_all();
        continue;
      }
      // Still pending? An earlier event of this pass may have dropped it.
      for (auto& u : pending_)
        if (u.get() == p) {
          read_hello(p);
          break;
        }
    }
    if (n < 32) break;
  }
  tick();
}

void HelloListener::tick() {
  if (!pending_.empty()) expire();
  // Refusals counted since the last line: one line for all of them, at most every kLogEvery.
  if (!unlogged_.empty() && Clock::now() - logged_at_ >= kLogEvery) count("", "");
}

void HelloListener::accept_all() {
  for (;;) {
    SockAddr from;
    from.len = sizeof from.ss;
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&from.ss), &from.len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (pending_.size() >= kMaxPending) {
      ::close(fd);
      count(std::to_string(kMaxPending) + " connections were already waiting to identify",
            from.to_string());
      continue;
    }
    auto p = std::make_unique<Pending>();
    p->fd = Fd(fd);
    p->from = from.to_string();
    p->since = Clock::now();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = p.get();
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev);
    pending_.push_back(std::move(p));
    read_hello(pending_.back().get());
  }
}

void HelloListener::read_hello(Pending* p) {
  // Read exactly the hello: what follows belongs to the driver.
  ssize_t r = ::recv(p->fd.get(), p->hello + p->got, hello_bytes_ - p->got, MSG_DONTWAIT);
  const char* why = nullptr;
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
    why = "closed before sending its hello";
  } else if (r > 0) {
    p->got += static_cast<size_t>(r);
    if (p->got < hello_bytes_) return;
    why = check_(p->hello);
  } else {
    return;
  }
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, p->fd.get(), nullptr);
  auto it = std::find_if(pending_.begin(), pending_.end(), [p](auto& u) { return u.get() == p; });
  std::unique_ptr<Pending> owned = std::move(*it);
  pending_.erase(it);
  if (why) return count(why, owned->from);
  take_(std::move(owned->fd), owned->hello);
}

void HelloListener::expire() {
  const auto now = Clock::now();
  for (size_t i = 0; i < pending_.size();) {
    if (now - pending_[i]->since < hello_timeout_) {
      ++i;
      continue;
    }
    count("sent no hello within " + std::to_string(hello_timeout_.count()) + " ms",
          pending_[i]->from);
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, pending_[i]->fd.get(), nullptr);
    pending_.erase(pending_.begin() + static_cast<long>(i));
  }
}

void HelloListener::refuse(const std::string& why) { count(why, ""); }

// why empty: only flush what was counted.
void HelloListener::count(const std::string& why, const std::string& from) {
  if (!why.empty()) ++rejected_;
  const auto now = Clock::now();
  if (!why.empty() && !logged_any_) {  // the first one says exactly what and from where
    logged_any_ = true;
    logged_at_ = now;
    log_->warn("{}: refused an incoming connection{}: {} (a peer of another job or version, "
               "or not gradwire; further refusals are summed up every {} s)",
               driver_, from.empty() ? "" : " from " + from, why, kLogEvery.count() / 1000);
    return;
  }
  if (!why.empty()) ++unlogged_[why];
  if (unlogged_.empty() || now - logged_at_ < kLogEvery) return;
  uint64_t total = 0;
  std::string parts;
  for (auto& [w, k] : unlogged_) {
    total += k;
    parts += (parts.empty() ? "" : "; ") + w + " x" + std::to_string(k);
  }
  log_->warn("{}: refused {} more incoming connections in the last {} s: {}", driver_, total,
             std::chrono::duration_cast<std::chrono::seconds>(now - logged_at_).count(), parts);
  unlogged_.clear();
  logged_at_ = now;
}

}  // namespace gw::core
