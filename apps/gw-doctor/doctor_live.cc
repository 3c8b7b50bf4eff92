// gw-doctor --live: asks every rank of this host through its health socket
// (lib/coll/health_server.h: "@gw-health/<job>/<rank>/<pid>.<n>", listed in /proc/net/unix),
// all at once with one deadline; a rank that does not answer in time is named with its
// process's state from /proc (stopped, a zombie, ...).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>

#include "doctor.h"

namespace gw::doctor {
namespace {

constexpr char kPrefix[] = "@gw-health/";

struct Sock {
  std::string name;  // without the leading '@'
  std::string job;
  int rank = 0, pid = 0;
  uint64_t n = 0;
  int fd = -1;
  std::string reply, why;
  bool done = false;
};

// "gw-health/<job>/<rank>/<pid>.<n>"
bool parse_name(const std::string& path, Sock* s) {
  if (path.rfind(kPrefix, 0) != 0) return false;
  s->name = path.substr(1);
  const std::string rest = path.substr(sizeof(kPrefix) - 1);
  const size_t a = rest.find('/'), b = rest.find('/', a + 1), c = rest.find('.', b + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos) return false;
  try {
    s->job = rest.substr(0, a);
    s->rank = std::stoi(rest.substr(a + 1, b - a - 1));
    s->pid = std::stoi(rest.substr(b + 1, c - b - 1));
    s->n = std::stoull(rest.substr(c + 1));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// Listening sockets only (state 01 with the accept flag): one per communicator; of several
// of one rank in one process, the newest.
std::vector<Sock> discover(const std::string& job) {
  std::ifstream in("/proc/net/unix");
  std::map<std::tuple<std::string, int, int>, Sock> by;
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(kPrefix);
    if (at == std::string::npos) continue;
    Sock s;
    if (!parse_name(line.substr(at), &s) || (!job.empty() && s.job != job)) continue;
    auto key = std::make_tuple(s.job, s.rank, s.pid);
    auto it = by.find(key);
    if (it == by.end() || it->second.n < s.n) by[key] = s;
  }
  std::vector<Sock> out;
  for (auto& [k, s] : by) out.push_back(std::move(s));
  return out;
}

std::string proc_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return "its process " + std::to_string(pid) + " is gone";
  const size_t p = stat.rfind(')');
  const char st = p != std::string::npos && p + 2 < stat.size() ? stat[p + 2] : '?';
  const std::string pid_s = "process " + std::to_string(pid);
  switch (st) {
    case 'T':
      return pid_s + " is stopped (SIGSTOP, SIGTSTP or job control)";
    case 't':
      return pid_s + " is stopped by a debugger";
    case 'Z':
      return pid_s + " is a zombie (exited, not reaped)";
    case 'D':
      return pid_s + " is in an uninterruptible wait (I/O, a driver)";
    default:
      return pid_s + " runs (state " + std::string(1, st) + ") but its health thread is stuck";
  }
}

void open_all(std::vector<Sock>& socks) {
  for (Sock& s : socks) {
    s.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, s.name.data(), std::min(s.name.size(), sizeof(a.sun_path) - 1));
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + s.name.size());
    if (s.fd < 0 || connect(s.fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
      s.why = errno == EAGAIN ? "its queue of queries is full" : std::strerror(errno);
      s.done = true;
    }
  }
}

void read_all(std::vector<Sock>& socks, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Sock*> who;
    for (Sock& s : socks) {
      if (s.done) continue;
      fds.push_back({s.fd, POLLIN, 0});
      who.push_back(&s);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    if (fds.empty() || left <= 0) break;
    if (poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      char buf[65536];
      const ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if (r > 0) {
        who[i]->reply.append(buf, static_cast<size_t>(r));
      } else if (r == 0 || errno != EAGAIN) {
        who[i]->done = true;
      }
    }
  }
  for (Sock& s : socks) {
    if (!s.done) s.why = "no answer within " + std::to_string(timeout_ms) + " ms";
    if (s.fd >= 0) close(s.fd);
  }
}

}  // namespace

std::vector<Job> query_live(const std::string& job, int timeout_ms) {
  std::vector<Sock> socks = discover(job);
  open_all(socks);
  read_all(socks, timeout_ms);
  std::map<std::string, Job> jobs;
  for (Sock& s : socks) {
    Job& j = jobs[s.job];
    j.id = s.job;
    const std::string src = "@" + s.name;
    if (s.why.empty()) {
      const nlohmann::json doc = nlohmann::json::parse(s.reply, nullptr, false);
      if (doc.is_discarded()) {
        s.why = "its answer is not valid JSON (" + std::to_string(s.reply.size()) + " bytes)";
      } else {
        try {
          j.ranks.push_back(parse_rank(doc, src));
          continue;
        } catch (const std::exception& e) {
          s.why = std::string("its answer is malformed: ") + e.what();
        }
      }
    }
    if (s.why.rfind("no answer", 0) == 0) s.why += ": " + proc_state(s.pid);
    j.silent.push_back({s.rank, s.pid, s.why});
  }
  std::vector<Job> out;
  for (auto& [id, j] : jobs) {
    std::sort(j.ranks.begin(), j.ranks.end(),
              [](const Rank& a, const Rank& b) { return a.rank < b.rank; });
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace gw::doctor
