// Config::dump() is TOML that loads back to the same settings, whatever text set() accepted
// (fuzz_config found "007" for an integer key; strings with quotes were never escaped).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gw_config.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(dumpsec, {"dumpsec.count", ConfigType::kInt, "3", "a count"},
               {"dumpsec.name", ConfigType::kString, "abc", "a name"},
               {"dumpsec.ratio", ConfigType::kDouble, "0.5", "a ratio"});

// Loads `toml`, dumps it, loads the dump. @return the second load.
Result<Config> round_trip(const std::string& toml) {
  char path[] = "/tmp/gw_test_config_dump_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << toml;
  auto c = Config::load(path);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return c.status();
  std::ofstream(path) << c->dump();
  auto again = Config::load(path);
  std::remove(path);
  return again;
}

TEST(ConfigDump, IntegerWithLeadingZeroesLoadsAgain) {
  // The input fuzz_config stopped on (tests/fuzz/corpus/fuzz_config/leading_zeroes).
  auto c = round_trip("[dumpsec]\ncount = \"000000000000000008161366602732904857\"\n");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(*c->get_int("dumpsec.count"), 8161366602732904857);
  c = round_trip("[dumpsec]\ncount = \"-007\"\n");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(*c->get_int("dumpsec.count"), -7);
}

TEST(ConfigDump, StringWithQuotesBackslashesAndControlsLoadsAgain) {
  auto c = round_trip("[dumpsec]\nname = \"a\\\"b\\\\c\\nd\\te\\u0001\"\n");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(*c->get_string("dumpsec.name"), "a\"b\\c\nd\te\x01");
}

TEST(ConfigDump, NumberStrtodTakesButTomlDoesNotLoadsAgain) {
  for (const char* v : {"0x1p3", "1.", ".5", "infinity", "1e999", " 2", "0x1p63", "-0x1p64"}) {
    auto c = round_trip(std::string("[dumpsec]\nratio = \"") + v + "\"\n");
    EXPECT_TRUE(c.ok()) << v << ": " << c.status().to_string();
  }
}

}  // namespace
}  // namespace gw
