// HelloListener: accept, read each hello, refuse with aggregated logging (gw_listener.h).
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "gw_listener.h"
#include "log.h"

namespace gw::core {

Status HelloListener::open(const char* driver, std::shared_ptr<spdlog::logger> log, SockAddr& at,
                           size_t hello_bytes, int hello_timeout_ms, Check check, Take take) {
  driver_ = driver;
  log_ = std::move(log);
  if (hello_bytes == 0 || hello_bytes > kMaxHello)
    return Status(Code::kInvalidArgument,
                  std::string(driver) + ": hello of " + std::to_string(hello_bytes) + " bytes");
  GW_ASSIGN_OR_RETURN(key_, auth::process_key());
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
  // Read exactly each stage's bytes: what follows the last belongs to the driver.
  const char* why = "";
  while (why && !*why) {
    const size_t need = p->stage == 0   ? hello_bytes_
                        : p->stage == 1 ? auth::kClientHello
                                        : auth::kMac;
    uint8_t* dst = p->stage == 0 ? p->hello : p->in;
    ssize_t r = ::recv(p->fd.get(), dst + p->got, need - p->got, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      why = p->stage == 0 ? "closed before sending its hello"
                          : "closed during authentication (it refused this rank's key?)";
    } else if (r > 0) {
      p->got += static_cast<size_t>(r);
      if (p->got == need) why = step(p);
    } else {
      return;
    }
  }
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, p->fd.get(), nullptr);
  auto it = std::find_if(pending_.begin(), pending_.end(), [p](auto& u) { return u.get() == p; });
  std::unique_ptr<Pending> owned = std::move(*it);
  pending_.erase(it);
  if (why && owned->stage > 0 && key_of_) {
    if (auth_refused_.size() >= kMaxPending) auth_refused_.erase(auth_refused_.begin());
    auth_refused_[key_of_(owned->hello)] = why;
  }
  if (why) return count(why, owned->from);
  take_(std::move(owned->fd), owned->hello);
}

const char* HelloListener::step(Pending* p) {
  p->got = 0;
  if (p->stage == 0) {
    if (const char* why = check_(p->hello)) return why;
    p->auth = std::make_unique<auth::Server>(key_, driver_, p->hello, hello_bytes_);
    p->stage = 1;
    return "";
  }
  uint8_t out[auth::kServerHello];
  auth::Server::Next next;
  size_t n;
  if (p->stage == 1) {
    next = p->auth->on_hello(p->in, out);
    n = auth::kServerHello;
  } else {
    next = p->auth->on_proof(p->in, out);
    n = auth::kVerdict;
  }
  // A fresh socket's buffer takes these few bytes whole; a short write is a dead peer (a
  // refused one may have hung up already: its refusal is the reason that counts).
  const bool sent =
      ::send(p->fd.get(), out, n, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(n);
  if (next == auth::Server::Next::kRefuse) return p->auth->why();
  if (!sent) return "closed during authentication";
  if (next == auth::Server::Next::kAccept) return nullptr;
  p->stage = 2;
  return "";
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

Status HelloListener::auth_refusal(uint64_t key, const std::string& who) {
  auto it = auth_refused_.find(key);
  if (it == auth_refused_.end()) return Status();
  Status st(Code::kUnavailable, std::string(driver_) + ": refused " + who + ": " + it->second);
  auth_refused_.erase(it);
  return st;
}

void HelloListener::refuse(const std::string& why) { count(why, ""); }

// why empty: only flush what was counted.
void HelloListener::count(const std::string& why, const std::string& from) {
  if (!why.empty()) ++rejected_;
  const auto now = Clock::now();
  if (!why.empty() && !logged_any_) {  // the first one says exactly what and from where
    logged_any_ = true;
    logged_at_ = now;
    log_->warn(
        "{}: refused an incoming connection{}: {} (a peer of another job or version, "
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
