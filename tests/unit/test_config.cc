#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gw_config.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(testsec, {"testsec.count", ConfigType::kInt, "3", "a count"},
               {"testsec.name", ConfigType::kString, "abc", "a name"},
               {"testsec.flag", ConfigType::kBool, "false", "a flag"},
               {"testsec.ratio", ConfigType::kDouble, "0.5", "a ratio"});

std::string write_file(const std::string& text) {
  char path[] = "/tmp/gw_test_config_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(Config, DefaultsWithoutFile) {
  auto c = Config::load("");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->get_int("testsec.count").value(), 3);
  EXPECT_EQ(c->get_string("testsec.name").value(), "abc");
  EXPECT_FALSE(c->get_bool("testsec.flag").value());
  EXPECT_DOUBLE_EQ(c->get_double("testsec.ratio").value(), 0.5);
}

TEST(Config, FileOverridesDefaults) {
  auto p = write_file("[testsec]\ncount = 7\nname = \"x\"\nflag = true\nratio = 1.5\n");
  auto c = Config::load(p);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->get_int("testsec.count").value(), 7);
  EXPECT_EQ(c->get_string("testsec.name").value(), "x");
  EXPECT_TRUE(c->get_bool("testsec.flag").value());
  EXPECT_DOUBLE_EQ(c->get_double("testsec.ratio").value(), 1.5);
  std::remove(p.c_str());
}

TEST(Config, UnknownKeyListsValidOnes) {
  auto p = write_file("[testsec]\ncont = 7\n");
  auto c = Config::load(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  std::string m(c.status().message());
  EXPECT_NE(m.find("testsec.cont"), std::string::npos) << m;
  EXPECT_NE(m.find("testsec.count"), std::string::npos) << m;
  EXPECT_NE(m.find(p), std::string::npos) << m;
  std::remove(p.c_str());
}

TEST(Config, WrongTypeIsRejected) {
  auto p = write_file("[testsec]\ncount = \"many\"\n");
  auto c = Config::load(p);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("not an integer"), std::string::npos);
  std::remove(p.c_str());
}

TEST(Config, SyntaxErrorNamesLine) {
  auto p = write_file("[testsec]\ncount = = 1\n");
  auto c = Config::load(p);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("line 2"), std::string::npos)
      << c.status().message();
  std::remove(p.c_str());
}

TEST(Config, MissingFileIsAnError) {
  auto c = Config::load("/nonexistent/gradwire.toml");
  EXPECT_FALSE(c.ok());
}

TEST(Config, EnvironmentOverridesFile) {
  auto p = write_file("[testsec]\ncount = 7\n");
  setenv("GW_TESTSEC_COUNT", "11", 1);
  auto c = Config::load(p);
  unsetenv("GW_TESTSEC_COUNT");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->get_int("testsec.count").value(), 11);
  EXPECT_NE(c->dump().find("environment GW_TESTSEC_COUNT"), std::string::npos);
  std::remove(p.c_str());
}

TEST(Config, MisspelledEnvironmentIsRejected) {
  setenv("GW_TESTSEC_CONUT", "11", 1);
  auto c = Config::load("");
  unsetenv("GW_TESTSEC_CONUT");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("GW_TESTSEC_CONUT"), std::string::npos);
}

TEST(Config, KvargsApplyToSection) {
  auto c = Config::load("");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->apply_kvargs("testsec", "count=5,name=y").ok());
  EXPECT_EQ(c->get_int("testsec.count").value(), 5);
  auto bad = c->apply_kvargs("testsec", "colour=red");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.message()).find("valid keys: count, flag, name, ratio"),
            std::string::npos)
      << bad.message();
  EXPECT_FALSE(c->apply_kvargs("testsec", "count=abc").ok());
}

// A driver's options: in range they read back; the first one out of range is the error, naming
// the key, the value, where it came from and what is allowed; nothing throws.
TEST(ConfigReader, RangesAndChoicesSayWhatIsWrongAndWhere) {
  auto c = Config::load("");
  ASSERT_TRUE(c.ok());
  {
    ConfigReader r(*c);
    EXPECT_EQ(r.in("testsec.count", 1, 10), 3);
    EXPECT_EQ(r.str("testsec.name"), "abc");
    EXPECT_FALSE(r.flag("testsec.flag"));
    EXPECT_DOUBLE_EQ(r.prob("testsec.ratio"), 0.5);
    EXPECT_EQ(r.one_of("testsec.name", {"x", "abc"}), "abc");
    EXPECT_TRUE(r.status().ok()) << r.status().to_string();
  }
  ASSERT_TRUE(c->apply_kvargs("testsec", "count=50,ratio=1.5").ok());
  ConfigReader r(*c);
  r.in("testsec.count", 1, 10, " (a test's limit)");
  r.prob("testsec.ratio");
  ASSERT_FALSE(r.status().ok());
  const std::string m(r.status().message());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(m.find("testsec.count = 50"), std::string::npos) << m;
  EXPECT_NE(m.find("device argument count"), std::string::npos) << "origin missing: " << m;
  EXPECT_NE(m.find("1..10 (a test's limit)"), std::string::npos) << m;
  EXPECT_EQ(m.find("ratio"), std::string::npos) << "the first error is kept: " << m;
  ConfigReader q(*c);
  q.prob("testsec.ratio");
  EXPECT_NE(std::string(q.status().message()).find("a probability, 0..1"), std::string::npos);
  ConfigReader u(*c);
  u.one_of("testsec.name", {"x", "y"});
  EXPECT_NE(std::string(u.status().message()).find("one of x, y"), std::string::npos);
  ConfigReader v(*c);
  v.in("testsec.undeclared", 0, 1);
  EXPECT_EQ(v.status().code(), Code::kInternal);
}

TEST(Kvargs, ParsesAndRejects) {
  std::vector<std::string> valid{"a", "b"};
  auto r = parse_kvargs("a=1,b=x=y,,", valid, "test");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->at("a"), "1");
  EXPECT_EQ(r->at("b"), "x=y");
  EXPECT_FALSE(parse_kvargs("a", valid, "test").ok());
  EXPECT_FALSE(parse_kvargs("=1", valid, "test").ok());
  EXPECT_FALSE(parse_kvargs("a=1,a=2", valid, "test").ok());
  EXPECT_FALSE(parse_kvargs("c=1", valid, "test").ok());
  EXPECT_TRUE(parse_kvargs("", valid, "test")->empty());
  // A list value goes on after commas until the next key=value (tcp:ifaces=eth0,eth1,...).
  auto list = parse_kvargs("a=eth0,eth1,eth2,b=2", valid, "test");
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_EQ(list->at("a"), "eth0,eth1,eth2");
  EXPECT_EQ(list->at("b"), "2");
  EXPECT_FALSE(parse_kvargs("eth0,a=1", valid, "test").ok()) << "a list item before any key";
}

TEST(Config, DumpIsValidTomlOfEveryKey) {
  auto c = Config::load("");
  ASSERT_TRUE(c.ok());
  auto text = c->dump();
  EXPECT_NE(text.find("[testsec]"), std::string::npos);
  EXPECT_NE(text.find("count = 3"), std::string::npos);
  auto p = write_file(text);
  auto again = Config::load(p);
  EXPECT_TRUE(again.ok()) << again.status().to_string();
  std::remove(p.c_str());
}

// What was set and the declared defaults (not copied into a Config) read and dump alike.
TEST(Config, DefaultsAndSetValuesKeepTheirOrigins) {
  auto p = write_file("[testsec]\ncount = 7\n");
  auto c = Config::load(p);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->origin_of("testsec.count"), "config " + p);
  EXPECT_EQ(c->origin_of("testsec.name"), "default");
  EXPECT_EQ(c->origin_of("testsec.nope"), "undeclared");
  EXPECT_EQ(c->get_int("testsec.nope").status().code(), Code::kInternal);
  EXPECT_EQ(c->get_string("testsec.nope").status().code(), Code::kInternal);
  auto text = c->dump();
  EXPECT_NE(text.find("count = 7  # config " + p + "; a count\n"), std::string::npos) << text;
  EXPECT_NE(text.find("name = \"abc\"  # default; a name\n"), std::string::npos) << text;
  ASSERT_TRUE(c->set("testsec.name", "x", "test").ok());
  EXPECT_EQ(c->origin_of("testsec.name"), "test");
  EXPECT_EQ(c->get_string("testsec.name").value(), "x");
  EXPECT_EQ(c->get_int("testsec.count").value(), 7);
  std::remove(p.c_str());
}

TEST(Config, ShippedFileLoads) {
  const char* path = std::getenv("GW_REPO_CONF");
  ASSERT_NE(path, nullptr) << "meson passes GW_REPO_CONF=conf/gradwire.toml";
  auto c = Config::load(path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_NE(c->dump().find("[tcp]"), std::string::npos);
}

}  // namespace
}  // namespace gw
