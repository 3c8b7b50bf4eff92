// A rank as a forked process, for tests that kill or stop it (tests/bootstrap).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>

namespace gw::test {

/// A forked rank: it reads the store's port from a pipe, runs `body` and _exit()s with its
/// result (0 = ok) unless body exits itself. Killed and reaped on destruction.
class ChildRank {
 public:
  explicit ChildRank(std::function<int(uint16_t port)> body) {
    int to_child[2], to_parent[2];
    if (::pipe(to_child) != 0 || ::pipe(to_parent) != 0) return;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(to_child[1]);
      ::close(to_parent[0]);
      uint16_t port = 0;
      if (::read(to_child[0], &port, sizeof port) != sizeof port) ::_exit(90);
      ready_fd_ = to_parent[1];
      ::_exit(body(port));
    }
    ::close(to_child[0]);
    ::close(to_parent[1]);
    pid_ = pid;
    port_fd_ = to_child[1];
    ready_fd_ = to_parent[0];
  }
  ~ChildRank() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (port_fd_ >= 0) ::close(port_fd_);
    if (ready_fd_ >= 0) ::close(ready_fd_);
  }
  /// Gives the child the port and waits until it says it is ready (its store connected).
  /// @return whether it did; `*said` gets the value it passed to ready().
  bool start(uint16_t port, uint16_t* said = nullptr) {
    uint16_t v = 0;
    bool ok = pid_ > 0 && ::write(port_fd_, &port, sizeof port) == sizeof port &&
              ::read(ready_fd_, &v, sizeof v) == sizeof v;
    if (said) *said = v;
    return ok;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  /// The child's exit status (waits for it).
  int reap() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  /// In the child: tell the parent it is ready, passing it `value`.
  static void ready(uint16_t value = 0) {
    if (::write(ready_fd_, &value, sizeof value) != sizeof value) ::_exit(91);
  }

 private:
  pid_t pid_ = -1;
  int port_fd_ = -1;
  static inline int ready_fd_ = -1;
};

}  // namespace gw::test
