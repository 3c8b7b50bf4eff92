// TOML configuration (Config::load, toml++ underneath, then our key and value checks). A file
// that loads must dump to TOML that loads again: dump() is what users paste back as a config.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "gw_config.h"

namespace {
std::string path_for(const char* what) {
  return "/dev/shm/gw-fuzz-" + std::string(what) + "-" + std::to_string(getpid()) + ".toml";
}

bool put(const std::string& path, std::string_view s) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  return std::fclose(f) == 0 && ok;
}
}  // namespace

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string in = path_for("in"), again = path_for("again");
  if (!put(in, {reinterpret_cast<const char*>(data), size})) return 0;
  auto c = gw::Config::load(in);
  if (!c.ok()) {
    if (c.status().message().empty()) std::abort();  // every refusal must say why
    return 0;
  }
  std::string dump = c->dump();
  if (!put(again, dump)) return 0;
  auto d = gw::Config::load(again);
  if (!d.ok()) {
    std::fprintf(stderr, "dump() does not load again: %s\n--- dump:\n%s\n",
                 d.status().to_string().c_str(), dump.c_str());
    std::abort();
  }
  return 0;
}
