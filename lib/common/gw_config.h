/// @file gw_config.h
/// Configuration: built-in defaults, then a TOML file (conf/gradwire.toml), then environment
/// overrides GW_<SECTION>_<KEY>, then per-transport device arguments. Every key is declared by
/// the component that reads it (GW_CONFIG_KEYS); unknown keys are rejected with the valid list.
/// Thread-safety: a Config is immutable once built except through set(); global() is loaded
/// once and never changes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gw_status.h"

namespace gw {

enum class ConfigType : uint8_t { kInt, kBool, kDouble, kString };

struct ConfigKeyDef {
  const char* key;  ///< "section.name", e.g. "tcp.streams"
  ConfigType type;
  const char* default_value;  ///< as text, parsed with the type's rules
  const char* help;
};

/// Declares keys at static-initialisation time; use through GW_CONFIG_KEYS.
class ConfigKeys {
 public:
  ConfigKeys(std::initializer_list<ConfigKeyDef> defs);
};

#define GW_CONFIG_KEYS(name, ...) \
  static const ::gw::ConfigKeys gw_config_keys_##name { __VA_ARGS__ }

class Config {
 public:
  /// Defaults, then `path` (skipped when empty), then environment overrides.
  /// @return InvalidArgument for an unreadable file, a syntax error, an unknown key or a value
  ///         of the wrong type; the message names the file/variable and lists valid keys.
  static Result<Config> load(const std::string& path);
  /// The process-wide configuration: the file named by GW_CONFIG (if set), loaded once.
  static Result<Config> global();

  /// Override one key ("tcp.streams", "4"); `origin` says where it came from, for dump().
  Status set(std::string_view key, std::string_view value, std::string_view origin);
  /// Apply "k=v,k=v" device arguments to the keys of `section`.
  Status apply_kvargs(std::string_view section, std::string_view kvargs);

  Result<int64_t> get_int(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<double> get_double(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;

  /// Where a key's value came from ("default", the file, a variable, a device argument).
  std::string origin_of(std::string_view key) const;

  /// Effective configuration as TOML, each value commented with its origin.
  std::string dump() const;
  /// Keys of one section, e.g. {"tcp.streams", ...}.
  static std::vector<std::string> keys_of(std::string_view section);

 private:
  struct Entry {
    std::string value;
    std::string origin;
  };
  std::map<std::string, Entry, std::less<>> entries_;
};

/// Reads a component's options: each value checked against its range, the first error kept
/// and named with where the value came from. No unchecked Result::value(), so no exception can
/// leave an init(); it ends with GW_RETURN_IF_ERROR(reader.status()).
class ConfigReader {
 public:
  explicit ConfigReader(const Config& cfg) : cfg_(cfg) {}
  /// An integer in lo..hi; `why` is appended to the error (e.g. " (0 would wait forever)").
  int64_t in(std::string_view key, int64_t lo, int64_t hi, std::string_view why = "");
  int64_t at_least(std::string_view key, int64_t lo) { return in(key, lo, INT64_MAX); }
  /// A probability, 0..1.
  double prob(std::string_view key);
  bool flag(std::string_view key);
  std::string str(std::string_view key);
  /// One of `choices` (e.g. {"auto", "on", "off"}).
  std::string one_of(std::string_view key, std::initializer_list<std::string_view> choices) {
    return one_of(key, std::span(choices.begin(), choices.size()));
  }
  std::string one_of(std::string_view key, std::span<const std::string_view> choices);
  const Status& status() const { return st_; }

 private:
  void bad(std::string_view key, const std::string& value, const std::string& want);
  const Config& cfg_;
  Status st_;
};

/// Split "k=v,k=v" into pairs. Keys must be in `valid`; `where` names the argument string in
/// errors. @return InvalidArgument naming the bad key and listing the valid ones.
Result<std::map<std::string, std::string>> parse_kvargs(std::string_view args,
                                                        const std::vector<std::string>& valid,
                                                        std::string_view where);

}  // namespace gw
