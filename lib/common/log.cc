#include "log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <mutex>

#include "gw_config.h"

namespace gw::log {
namespace {

GW_CONFIG_KEYS(log,
               {"log.level", ConfigType::kString, "info",
                "trace, debug, info, warn, error, critical or off"},
               {"log.file", ConfigType::kString, "", "log file; empty means stderr"});

struct Sinks {
  spdlog::sink_ptr sink;
  spdlog::level::level_enum level = spdlog::level::info;
};

Sinks& sinks() {
  static Sinks s = [] {
    Sinks r;
    std::string level = "info", file;
    if (auto c = Config::global(); c.ok()) {
      level = c->get_string("log.level").value();
      file = c->get_string("log.file").value();
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
    if (!r.sink) r.sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
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
