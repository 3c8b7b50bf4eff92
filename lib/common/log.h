/// @file log.h
/// Named spdlog loggers, one per component ("gw.transport", "gw.drv.tcp"). Level from
/// log.level (GW_LOG_LEVEL), destination from log.file (GW_LOG_FILE, default stderr).
/// Internal header: spdlog stays out of the public API. Hot paths use GW_TRACE only.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace gw::log {

/// The logger named `name`, created on first use; thread-safe.
std::shared_ptr<spdlog::logger> get(const char* name);

}  // namespace gw::log

/// Hot-path logging, compiled out unless built with -Dtrace=true.
#define GW_TRACE(logger, ...) SPDLOG_LOGGER_TRACE(logger, __VA_ARGS__)
