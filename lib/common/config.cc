#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sstream>

#include "gw_config.h"
#include "gw_options.h"

extern char** environ;

namespace gw {
namespace {

std::map<std::string, ConfigKeyDef, std::less<>>& schema() {
  static std::map<std::string, ConfigKeyDef, std::less<>> s;
  return s;
}

std::string section_of(std::string_view key) { return std::string(key.substr(0, key.find('.'))); }

std::string env_name(std::string_view key) {
  std::string e = "GW_";
  for (char c : key) e += (c == '.') ? '_' : static_cast<char>(std::toupper(c));
  return e;
}

// Whether `name` is env_name(key), without building it.
bool is_env_name(std::string_view name, std::string_view key) {
  if (name.size() != key.size() + 3 || !name.starts_with("GW_")) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i];
    if (name[i + 3] != ((c == '.') ? '_' : static_cast<char>(std::toupper(c)))) return false;
  }
  return true;
}

std::string join_keys(std::string_view section) {
  std::string out;
  for (auto& k : Config::keys_of(section)) out += (out.empty() ? "" : ", ") + k;
  return out;
}

Status check_value(const ConfigKeyDef& def, std::string_view v, std::string_view origin) {
  bool ok = true;
  switch (def.type) {
    case ConfigType::kInt: {
      int64_t x;
      auto r = std::from_chars(v.data(), v.data() + v.size(), x);
      ok = r.ec == std::errc() && r.ptr == v.data() + v.size();
      break;
    }
    case ConfigType::kDouble: {
      char* end = nullptr;
      std::string s(v);
      std::strtod(s.c_str(), &end);
      ok = !s.empty() && *end == '\0';
      break;
    }
    case ConfigType::kBool:
      ok = v == "true" || v == "false" || v == "1" || v == "0";
      break;
    case ConfigType::kString:
      break;
  }
  if (ok) return Status();
  static const char* names[] = {"an integer", "a boolean", "a number", "a string"};
  return Status(Code::kInvalidArgument,
                std::string(origin) + ": " + def.key + " = '" + std::string(v) + "' is not " +
                    names[static_cast<int>(def.type)] + " (" + def.help + ")");
}

// `v` (check_value accepted it) as TOML that loads back to the same setting: integers and
// numbers in their plain form (set() takes "007" or "0x1p3", TOML does not), strings escaped.
std::string toml_value(ConfigType type, const std::string& v) {
  char buf[64];
  if (type == ConfigType::kInt) {
    int64_t x = 0;
    std::from_chars(v.data(), v.data() + v.size(), x);
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
  }
  if (type == ConfigType::kDouble) {  // shortest round trip; inf and nan are TOML's too
    std::string d(buf, std::to_chars(buf, buf + sizeof buf, std::strtod(v.c_str(), nullptr)).ptr);
    // All digits (2^63 is "9223372036854775808") would read as an integer, maybe too large.
    return d.find_first_not_of("-0123456789") == std::string::npos ? d + ".0" : d;
  }
  if (type == ConfigType::kBool) return v;
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + '"';
}

// A key's value and where it came from: what was set (entries_ holds only that), else the
// declared default; nullopt for an undeclared key.
struct Setting {
  std::string_view value, origin;
};
template <class Entries>
std::optional<Setting> setting_of(const Entries& entries, std::string_view key) {
  if (auto it = entries.find(key); it != entries.end())
    return Setting{it->second.value, it->second.origin};
  if (auto it = schema().find(key); it != schema().end())
    return Setting{it->second.default_value, "default"};
  return std::nullopt;
}

}  // namespace

ConfigKeys::ConfigKeys(std::initializer_list<ConfigKeyDef> defs) {
  for (auto& d : defs) schema().emplace(d.key, d);
}

std::vector<std::string> Config::keys_of(std::string_view section) {
  std::vector<std::string> out;
  for (auto& [k, d] : schema()) {
    std::string_view key(k);  // section_of(k) == section, without a string per key
    if (key.substr(0, key.find('.')) == section) out.push_back(k);
  }
  return out;
}

Status Config::set(std::string_view key, std::string_view value, std::string_view origin) {
  auto it = schema().find(key);
  if (it == schema().end()) {
    auto sec = section_of(key);
    auto valid = join_keys(sec);
    return Status(Code::kInvalidArgument,
                  std::string(origin) + ": unknown configuration key '" + std::string(key) +
                      "'; valid keys" +
                      (valid.empty() ? " are in sections other than '" + sec + "'"
                                     : " of [" + sec + "]: " + valid));
  }
  GW_RETURN_IF_ERROR(check_value(it->second, value, origin));
  entries_[std::string(key)] = Entry{std::string(value), std::string(origin)};
  return Status();
}

namespace {

// A TOML scalar as the text Config::set parses; InvalidArgument for tables and arrays.
Result<std::string> scalar_text(const toml::node& v, const std::string& path,
                                const std::string& key) {
  if (auto s = v.value<std::string>(); s && v.is_string()) return *s;
  if (v.is_boolean()) return std::string(*v.value<bool>() ? "true" : "false");
  if (v.is_integer()) return std::to_string(*v.value<int64_t>());
  if (v.is_floating_point()) {
    std::ostringstream os;
    os << *v.value<double>();
    return os.str();
  }
  return Status(Code::kInvalidArgument, "config " + path + ": " + key + " must be a scalar value");
}

Status load_file(Config& c, const std::string& path) {
  toml::table tbl;
  try {
    tbl = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << e.description() << " at line " << e.source().begin.line;
    return Status(Code::kInvalidArgument,
                  "config " + path + ": " + os.str() + " (check the file's TOML syntax)");
  }
  for (auto& [sec, node] : tbl) {
    auto* t = node.as_table();
    if (!t) {
      return Status(Code::kInvalidArgument, "config " + path + ": top-level key '" +
                                                std::string(sec.str()) +
                                                "' must be a [section] table");
    }
    for (auto& [k, v] : *t) {
      std::string key = std::string(sec.str()) + "." + std::string(k.str());
      GW_ASSIGN_OR_RETURN(auto text, scalar_text(v, path, key));
      GW_RETURN_IF_ERROR(c.set(key, text, "config " + path));
    }
  }
  return Status();
}

// Environment overrides: GW_<SECTION>_<KEY>. A variable that names a known section but no key
// of it is a typo we refuse, rather than silently ignore. (Each GW_ variable is matched
// against the keys in place: no table of every key's name per load.)
Status load_env(Config& c) {
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || !kv.starts_with("GW_")) continue;
    std::string name(kv.substr(0, eq));
    std::string_view value = kv.substr(eq + 1);
    const std::string* key = nullptr;
    for (auto& [k, d] : schema())
      if (is_env_name(name, k)) key = &k;  // the last match, as a name -> key table kept
    if (key) {
      GW_RETURN_IF_ERROR(c.set(*key, value, "environment " + name));
      continue;
    }
    std::vector<std::string> sections;
    for (auto& [k, d] : schema()) {
      auto s = section_of(k);
      if (std::find(sections.begin(), sections.end(), s) == sections.end()) sections.push_back(s);
    }
    for (auto& s : sections) {
      if (name.starts_with(env_name(s) + "_")) {
        return Status(Code::kInvalidArgument,
                      "environment " + name + " is not a gradwire setting; valid keys of [" + s +
                          "]: " + join_keys(s) + " (as GW_" + env_name(s).substr(3) + "_<KEY>)");
      }
    }
  }
  return Status();
}

}  // namespace

Result<Config> Config::load(const std::string& path) {
  // Defaults are not copied in (setting_of falls back to them): a file that fails to load
  // costs nothing per declared key.
  Config c;
  if (!path.empty()) GW_RETURN_IF_ERROR(load_file(c, path));
  GW_RETURN_IF_ERROR(load_env(c));
  return c;
}

Result<Config> Config::global() {
  static std::once_flag once;
  static Result<Config> cfg{Status(Code::kInternal, "config not loaded")};
  std::call_once(once, [] {
    const char* p = std::getenv("GW_CONFIG");
    cfg = load(p ? p : "");
  });
  return cfg;
}

Status Config::apply_kvargs(std::string_view section, std::string_view kvargs) {
  std::vector<std::string> valid;
  for (auto& k : keys_of(section)) valid.push_back(k.substr(section.size() + 1));
  GW_ASSIGN_OR_RETURN(auto kv, parse_kvargs(kvargs, valid, std::string(section) + " arguments"));
  for (auto& [k, v] : kv)
    GW_RETURN_IF_ERROR(set(std::string(section) + "." + k, v, "device argument " + k));
  return Status();
}

Result<int64_t> Config::get_int(std::string_view key) const {
  auto s = setting_of(entries_, key);
  if (!s) return Status(Code::kInternal, "config key " + std::string(key) + " is not declared");
  int64_t x = 0;
  std::from_chars(s->value.data(), s->value.data() + s->value.size(), x);
  return x;
}

Result<bool> Config::get_bool(std::string_view key) const {
  GW_ASSIGN_OR_RETURN(auto s, get_string(key));
  return s == "true" || s == "1";
}

Result<double> Config::get_double(std::string_view key) const {
  GW_ASSIGN_OR_RETURN(auto s, get_string(key));
  return std::strtod(s.c_str(), nullptr);
}

Result<std::string> Config::get_string(std::string_view key) const {
  auto s = setting_of(entries_, key);
  if (!s) return Status(Code::kInternal, "config key " + std::string(key) + " is not declared");
  return std::string(s->value);
}

std::string Config::origin_of(std::string_view key) const {
  auto s = setting_of(entries_, key);
  return s ? std::string(s->origin) : "undeclared";
}

// --- ConfigReader ---

void ConfigReader::bad(std::string_view key, const std::string& value, const std::string& want) {
  if (!st_.ok()) return;  // the first error is the one to fix first
  st_ = Status(Code::kInvalidArgument, std::string(key) + " = " + value + " (from " +
                                           cfg_.origin_of(key) + ") must be " + want);
}

int64_t ConfigReader::in(std::string_view key, int64_t lo, int64_t hi, std::string_view why) {
  auto s = cfg_.get_string(key);
  if (!s.ok()) {
    if (st_.ok()) st_ = s.status();
    return lo;
  }
  int64_t x = 0;
  const char* b = s->data();
  auto [end, ec] = std::from_chars(b, b + s->size(), x);
  if (ec != std::errc() || end != b + s->size()) {
    bad(key, "'" + *s + "'", "an integer");
    return lo;
  }
  if (x < lo || x > hi) {
    std::string want = hi == INT64_MAX ? "at least " + std::to_string(lo)
                                       : std::to_string(lo) + ".." + std::to_string(hi);
    bad(key, *s, want + std::string(why));
    return lo;
  }
  return x;
}

double ConfigReader::prob(std::string_view key) {
  const std::string s = str(key);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(x >= 0 && x <= 1)) {
    bad(key, "'" + s + "'", "a probability, 0..1");
    return 0;
  }
  return x;
}

bool ConfigReader::flag(std::string_view key) {
  const std::string s = str(key);
  if (s == "true" || s == "1") return true;
  if (s != "false" && s != "0") bad(key, "'" + s + "'", "true or false");
  return false;
}

std::string ConfigReader::str(std::string_view key) {
  auto s = cfg_.get_string(key);
  if (s.ok()) return *s;
  if (st_.ok()) st_ = s.status();
  return "";
}

std::string ConfigReader::one_of(std::string_view key, std::span<const std::string_view> choices) {
  std::string s = str(key);
  std::string list;
  for (auto c : choices) {
    if (s == c) return s;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  bad(key, "'" + s + "'", "one of " + list);
  return std::string(choices.front());
}

// --- option tables (gw_options.h) ---

void declare_option(std::string_view section, const OptionSpec& spec) {
  ConfigKeyDef def{nullptr, spec.type, spec.default_value, spec.help};
  auto it = schema().emplace(std::string(section) + "." + spec.name, def).first;
  it->second.key = it->first.c_str();  // a map key does not move
}

OptionValue read_option(ConfigReader& r, std::string_view section, const OptionSpec& spec) {
  const std::string key = std::string(section) + "." + spec.name;
  OptionValue v;
  switch (spec.type) {
    case ConfigType::kInt:
      v.i = r.in(key, spec.lo, spec.hi, spec.why);
      break;
    case ConfigType::kBool:
      v.b = r.flag(key);
      break;
    case ConfigType::kDouble:
      v.d = r.prob(key);
      break;
    case ConfigType::kString:
      if (!spec.choices) {
        v.s = r.str(key);
        break;
      }
      std::vector<std::string_view> choices;
      for (std::string_view c = spec.choices;;) {
        const auto bar = c.find('|');
        choices.push_back(c.substr(0, bar));
        if (bar == std::string_view::npos) break;
        c.remove_prefix(bar + 1);
      }
      v.s = r.one_of(key, choices);
      break;
  }
  return v;
}

std::string Config::dump() const {
  std::ostringstream os;
  std::string cur;
  for (auto& [k, def] : schema()) {
    auto sec = section_of(k);
    if (sec != cur) {
      os << (cur.empty() ? "" : "\n") << "[" << sec << "]\n";
      cur = sec;
    }
    const Setting s = *setting_of(entries_, k);
    os << k.substr(sec.size() + 1) << " = " << toml_value(def.type, std::string(s.value));
    os << "  # " << s.origin << "; " << def.help << "\n";
  }
  return os.str();
}

Result<std::map<std::string, std::string>> parse_kvargs(std::string_view args,
                                                        const std::vector<std::string>& valid,
                                                        std::string_view where) {
  std::map<std::string, std::string> out;
  std::string last;  // a list value goes on after commas: "ifaces=eth0,eth1,streams=2"
  while (!args.empty()) {
    auto comma = args.find(',');
    std::string_view item = args.substr(0, comma);
    args = comma == std::string_view::npos ? std::string_view() : args.substr(comma + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string_view::npos && !last.empty()) {
      out[last] += "," + std::string(item);
      continue;
    }
    if (eq == std::string_view::npos || eq == 0) {
      return Status(Code::kInvalidArgument,
                    std::string(where) + ": '" + std::string(item) + "' is not key=value");
    }
    std::string key(item.substr(0, eq));
    if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
      std::string list;
      for (auto& v : valid) list += (list.empty() ? "" : ", ") + v;
      return Status(Code::kInvalidArgument,
                    std::string(where) + ": unknown key '" + key + "'; valid keys: " + list);
    }
    if (out.count(key)) {
      return Status(Code::kInvalidArgument, std::string(where) + ": key '" + key + "' given twice");
    }
    out[key] = std::string(item.substr(eq + 1));
    last = key;
  }
  return out;
}

}  // namespace gw
