/// @file gw_transport_driver.h
/// For driver writers: the registry. A driver registers itself with one macro that names its
/// priority for "auto" selection and the device arguments (config keys of its section) it takes.
#pragma once

#include <initializer_list>
#include <memory>

#include "gw_config.h"
#include "gw_transport.h"

namespace gw {

/// Opens the driver with `cfg`, whose [<driver>] keys already hold the device arguments.
using DriverOpenFn = Result<std::unique_ptr<Transport>> (*)(const Config& cfg);

class DriverRegistrar {
 public:
  DriverRegistrar(const char* name, int priority, DriverOpenFn open);
};

}  // namespace gw

/// GW_REGISTER_DRIVER(tcp, 10, open_fn, {"tcp.streams", kInt, "1", "help"}, ...)
#define GW_REGISTER_DRIVER(name, priority, open_fn, ...)    \
  GW_CONFIG_KEYS(name, __VA_ARGS__);                        \
  static const ::gw::DriverRegistrar gw_driver_##name { #name, priority, open_fn }
