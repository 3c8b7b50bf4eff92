#include "log.h"

#include <poll.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <mutex>

#include "gw_config.h"

namespace gw::log {
namespace {

GW_CONFIG_KEYS(log,
               {"log.level", ConfigType::kString, "info",
                "trace, debug, info, warn, error, critical or off"},
               {"log.file", ConfigType::kString, "", "log file; empty means stderr"});

/// stderr that never blocks its caller: a line is written only while the fd can take it
/// (poll), else dropped and counted, and the count is written first once it drains. A launcher
/// that stops reading a rank's stderr then costs log lines, not a hung progress loop.
class NonBlockingStderr final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    if (dropped_ > 0) {
      char note[128];
      int n = std::snprintf(note, sizeof note,
                            "[gradwire: %llu log lines dropped: stderr was not being read]\n",
                            static_cast<unsigned long long>(dropped_));
      if (!put(note, static_cast<size_t>(n))) {
        ++dropped_;
        return;
      }
      dropped_ = 0;
    }
    if (!put(buf.data(), buf.size())) ++dropped_;
  }
  void flush_() override {}

 private:
  // Pieces of at most PIPE_BUF bytes: POLLOUT on a pipe promises room for that much.
  static bool put(const char* p, size_t n) {
    while (n > 0) {
      pollfd pf{STDERR_FILENO, POLLOUT, 0};
      if (::poll(&pf, 1, 0) != 1 || !(pf.revents & POLLOUT)) return false;
      ssize_t w = ::write(STDERR_FILENO, p, std::min<size_t>(n, PIPE_BUF));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  uint64_t dropped_ = 0;
};

struct Sinks {
  spdlog::sink_ptr sink;
  spdlog::level::level_enum level = spdlog::level::info;
};

Sinks& sinks() {
  static Sinks s = [] {
    Sinks r;
    std::string level = "info", file;
    if (auto c = Config::global(); c.ok()) {
      // Checked, not value(): no exception may leave the library.
      if (auto l = c->get_string("log.level"); l.ok()) level = *l;
      if (auto f = c->get_string("log.file"); f.ok()) file = *f;
    }
    r.level = spdlog::level::from_str(level);
    if (!file.empty()) {
      try {
        r.sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
      } catch (const spdlog::spdlog_ex& e) {
        std::fprintf(stderr, "gradwire: cannot open log file %s (%s); logging to stderr\n",
                     file.c_str(), e.what());
      }
    }
    if (!r.sink) r.sink = std::make_shared<NonBlockingStderr>();
    return r;
  }();
  return s;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(const char* name) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto l = spdlog::get(name)) return l;
  auto& s = sinks();
  auto l = std::make_shared<spdlog::logger>(name, s.sink);
  l->set_level(s.level);
  l->set_pattern("[%H:%M:%S.%e] [%n] [%l] [pid %P] %v");
  spdlog::register_logger(l);
  return l;
}

}  // namespace gw::log
