/// @file gw_options.h
/// Options from one table: each key is declared once, with its type, default, range, help and
/// the field it fills. The table both declares the keys (what --help, dump() and validation
/// see, as GW_CONFIG_KEYS does) and reads them, range-checked, into an options struct.
/// Thread-safety: tables are constant; OptionKeys runs at static initialisation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "gw_config.h"

namespace gw {

/// A key's value as read, for a setter to take the part its type wants.
struct OptionValue {
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
};

/// How a key is declared and checked, apart from where its value goes.
struct OptionSpec {
  const char* name;  ///< without the section: "streams" is read as "tcp.streams"
  ConfigType type;   ///< kDouble is read as a probability, 0..1
  const char* default_value;
  const char* help;
  int64_t lo = 0, hi = INT64_MAX;  ///< kInt: accepted range
  const char* why = "";            ///< kInt: appended to an out-of-range error
  const char* choices = nullptr;   ///< kString: "a|b|c", the values accepted (null: any)
};

/// One row of a table: the key and the setter that stores its value in an `O`.
template <class O>
struct OptionDef {
  using Setter = void (*)(O&, const OptionValue&);
  OptionSpec spec;
  Setter set;  ///< null: declared here, read elsewhere by name

  // Rows by kind: an integer in lo..hi (`why` ends its range error), a boolean, a probability
  // (default 0), a string (`choices` "a|b": one of those).
  static constexpr OptionDef integer(const char* name, const char* dflt, int64_t lo, int64_t hi,
                                     Setter set, const char* help, const char* why = "") {
    return {{name, ConfigType::kInt, dflt, help, lo, hi, why}, set};
  }
  static constexpr OptionDef boolean(const char* name, const char* dflt, Setter set,
                                     const char* help) {
    return {{name, ConfigType::kBool, dflt, help}, set};
  }
  static constexpr OptionDef prob(const char* name, Setter set, const char* help) {
    return {{name, ConfigType::kDouble, "0", help}, set};
  }
  static constexpr OptionDef text(const char* name, const char* dflt, Setter set, const char* help,
                                  const char* choices = nullptr) {
    return {{name, ConfigType::kString, dflt, help, 0, 0, "", choices}, set};
  }
};

/// Declares `spec` as "<section>.<name>" (config.cc).
void declare_option(std::string_view section, const OptionSpec& spec);
/// Reads "<section>.<name>" as `spec` says, errors kept in `r` (config.cc).
OptionValue read_option(ConfigReader& r, std::string_view section, const OptionSpec& spec);

/// Declares a table's keys at static-initialisation time (GW_REGISTER_DRIVER).
class OptionKeys {
 public:
  template <class O, size_t N>
  OptionKeys(std::string_view section, const std::array<OptionDef<O>, N>& table) {
    for (const auto& d : table) declare_option(section, d.spec);
  }
};

/// Reads every key of `table` that has a setter into `*out`.
/// @return InvalidArgument naming the first bad key, its origin and what it must be.
template <class O, size_t N>
Status read_options(const Config& cfg, std::string_view section,
                    const std::array<OptionDef<O>, N>& table, O* out) {
  ConfigReader r(cfg);
  for (const auto& d : table)
    if (d.set) d.set(*out, read_option(r, section, d.spec));
  return r.status();
}

/// Two tables as one (common keys, then a driver's own).
template <class O, size_t A, size_t B>
constexpr std::array<OptionDef<O>, A + B> join(const std::array<OptionDef<O>, A>& a,
                                               const std::array<OptionDef<O>, B>& b) {
  std::array<OptionDef<O>, A + B> out{};
  for (size_t i = 0; i < A; ++i) out[i] = a[i];
  for (size_t i = 0; i < B; ++i) out[A + i] = b[i];
  return out;
}

namespace opt_detail {
template <class M>
struct ClassOf;
template <class C, class T>
struct ClassOf<T C::*> {
  using type = C;
};
// Field `o.*M.*Ms...` takes the value's part of its type, times `Scale` for integers.
template <int64_t Scale, auto M, auto... Ms>
void put(typename ClassOf<decltype(M)>::type& o, const OptionValue& v) {
  auto& f = ((o.*M).*....*Ms);
  using T = std::remove_cvref_t<decltype(f)>;
  if constexpr (std::is_same_v<T, std::string>)
    f = v.s;
  else if constexpr (std::is_same_v<T, bool>)
    f = v.b;
  else if constexpr (std::is_floating_point_v<T>)
    f = static_cast<T>(v.d);
  else
    f = static_cast<T>(static_cast<T>(v.i) * static_cast<T>(Scale));
}
}  // namespace opt_detail

/// The setter of a field, by member path: to<&Options::streams>,
/// to<&Options::staging, &StagingPool::Options::slots>.
template <auto M, auto... Ms>
inline constexpr auto to = &opt_detail::put<1, M, Ms...>;
/// The same for an integer field in finer units: scaled<1'000'000, &Options::heartbeat_ns>
/// stores milliseconds as nanoseconds.
template <int64_t Scale, auto M, auto... Ms>
inline constexpr auto scaled = &opt_detail::put<Scale, M, Ms...>;

}  // namespace gw
