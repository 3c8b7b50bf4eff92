// gradwire's own log lines (driver warnings such as "peer reset the connection") go through
// NCCL's logger too once init() has one, so NCCL_DEBUG/NCCL_DEBUG_FILE see them beside NCCL's.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <string>

#include "nccl_plugin.h"

namespace gw::nccl {
namespace {

class NcclSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    ncclDebugLogLevel level = msg.level >= spdlog::level::warn   ? NCCL_LOG_WARN
                              : msg.level == spdlog::level::info ? NCCL_LOG_INFO
                                                                 : NCCL_LOG_TRACE;
    std::string name(msg.logger_name.data(), msg.logger_name.size());
    std::string text(msg.payload.data(), msg.payload.size());
    logf(level, "NET/gradwire [%s] %s", name.c_str(), text.c_str());
  }
  void flush_() override {}
};

}  // namespace

void route_gradwire_logs() {
  static auto sink = std::make_shared<NcclSink>();
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) {
    if (l->name().rfind("gw.", 0) == 0) l->sinks().assign(1, sink);
  });
}

}  // namespace gw::nccl
