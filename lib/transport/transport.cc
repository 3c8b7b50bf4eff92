// Transport registry, "auto" fallback selection and Address encoding.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "gw_build_config.h"
#include "gw_transport_driver.h"
#include "log.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(transport,
               {"transport.spin_us", ConfigType::kInt, "-2",
                "blocking waits poll this long before sleeping on the driver's fd "
                "(-1: poll forever, 0: sleep at once, -2: 20, or 0 when this host "
                "runs more local ranks than the process may use CPUs)"},
               {"transport.yield_us", ConfigType::kInt, "-2",
                "after spinning, blocking waits yield the CPU (sched_yield) this long before "
                "sleeping (0: never; -2: 500 when this host runs more local ranks than the "
                "process may use CPUs, else 0)"},
               {"transport.default", ConfigType::kString, "auto",
                "transport spec used when an app is not told one (auto = rdma, dpdk, tcp)"});

struct DriverEntry {
  const char* name;
  int priority;
  DriverOpenFn open;
};

std::vector<DriverEntry>& registry() {
  static std::vector<DriverEntry> r;
  return r;
}

// Drivers meson left out, with its reason (generated at configure time).
#ifndef GW_SKIPPED_DRIVERS
#define GW_SKIPPED_DRIVERS ""
#endif

Result<std::unique_ptr<Transport>> open_one(const DriverEntry& d, std::string_view args) {
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  GW_RETURN_IF_ERROR(cfg.apply_kvargs(d.name, args));
  return d.open(cfg);
}

}  // namespace

DriverRegistrar::DriverRegistrar(const char* name, int priority, DriverOpenFn open) {
  auto& r = registry();
  r.push_back({name, priority, open});
  std::stable_sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.priority > b.priority; });
}

std::vector<std::string> Transport::drivers() {
  std::vector<std::string> out;
  for (auto& d : registry()) out.emplace_back(d.name);
  return out;
}

Status Transport::abort(std::string_view reason) {
  return Status(Code::kNotSupported, "transport '" + properties().name +
                                         "' cannot abort (asked: " + std::string(reason) + ")");
}

Result<size_t> Transport::cancel_tags(uint64_t, uint64_t) {
  return Status(Code::kNotSupported,
                "transport '" + properties().name + "' cannot take back posted receives");
}

void Transport::accept_tags(uint64_t, uint64_t) {}

Result<std::unique_ptr<Transport>> Transport::open(std::string_view spec) {
  auto lg = log::get("gw.transport");
  auto colon = spec.find(':');
  std::string_view name = spec.substr(0, colon);
  std::string_view args = colon == std::string_view::npos ? "" : spec.substr(colon + 1);
  if (name == "auto") {
    if (!args.empty()) return Status(Code::kInvalidArgument, "transport 'auto' takes no arguments");
    std::string why;
    for (auto& d : registry()) {
      auto t = open_one(d, "");
      if (t.ok()) {
        lg->info("transport auto: picked {}{}{}{}", d.name, why.empty() ? "" : " (skipped: ", why,
                 why.empty() ? "" : ")");
        return t;
      }
      why += std::string(why.empty() ? "" : "; ") + d.name + ": " + t.status().to_string();
    }
    std::string skipped = GW_SKIPPED_DRIVERS;
    return Status(Code::kUnavailable, "no transport could be opened: " + why +
                                          (skipped.empty() ? "" : "; not built: " + skipped));
  }
  for (auto& d : registry()) {
    if (name == d.name) {
      auto t = open_one(d, args);
      if (t.ok()) lg->debug("transport {} opened ({})", d.name, args);
      return t;
    }
  }
  std::string list;
  for (auto& d : registry()) list += (list.empty() ? "" : ", ") + std::string(d.name);
  std::string skipped = GW_SKIPPED_DRIVERS;
  return Status(Code::kInvalidArgument, "unknown transport '" + std::string(name) +
                                            "'; built: " + list + ", auto" +
                                            (skipped.empty() ? "" : "; not built: " + skipped));
}

Result<Address> Address::make(std::string_view driver, uint8_t version,
                              std::span<const uint8_t> payload) {
  if (driver.size() > 8 || kHeader + payload.size() > kMaxSize) {
    return Status(Code::kInvalidArgument, "address of driver " + std::string(driver) + " (" +
                                              std::to_string(payload.size()) +
                                              " bytes) does not fit in 128 bytes");
  }
  Address a;
  std::memcpy(a.bytes_.data(), driver.data(), driver.size());
  a.bytes_[8] = version;
  std::memcpy(a.bytes_.data() + kHeader, payload.data(), payload.size());
  a.size_ = kHeader + payload.size();
  return a;
}

Result<Address> Address::from_bytes(std::string_view bytes) {
  if (bytes.size() < kHeader || bytes.size() > kMaxSize) {
    return Status(Code::kProtocolError,
                  "address blob of " + std::to_string(bytes.size()) + " bytes (expected 9..128)");
  }
  Address a;
  std::memcpy(a.bytes_.data(), bytes.data(), bytes.size());
  a.size_ = bytes.size();
  return a;
}

std::string_view Address::driver() const {
  auto* p = reinterpret_cast<const char*>(bytes_.data());
  return {p, strnlen(p, 8)};
}

}  // namespace gw
