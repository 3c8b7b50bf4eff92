// Option tables (gw_options.h, gw_driver_options.h): one row declares a key and reads it, with
// the errors ConfigReader gives for the same range.
#include <gtest/gtest.h>

#include <string>

#include "gw_driver_options.h"
#include "gw_options.h"

namespace gw {
namespace {

struct OptStaging {
  size_t chunk_bytes = 0;
  uint32_t slots = 0;
};
struct OptInner {
  int count = 0;
  uint64_t cq_depth = 0, max_message = 0, unexpected_bytes = 0;
  uint32_t max_outstanding = 0;
  OptStaging staging;
};
struct OptTarget {
  OptInner in;
  uint64_t wait_ns = 0;
  bool flag = false;
  double drop = 0;
  std::string name, mode, elsewhere = "untouched";
};

using Opt = OptionDef<OptTarget>;
constexpr auto kOptTable =
    join(core::common_options<OptTarget, &OptTarget::in>({.staging_slots_max = 16}),
         std::to_array<Opt>({
             Opt::integer("count", "3", 1, 10, to<&OptTarget::in, &OptInner::count>, "a count",
                          " (a test's limit)"),
             Opt::integer("wait_ms", "5", 0, 100, scaled<1'000'000, &OptTarget::wait_ns>, "a wait"),
             Opt::boolean("flag", "true", to<&OptTarget::flag>, "a flag"),
             Opt::prob("drop", to<&OptTarget::drop>, "a probability"),
             Opt::text("name", "abc", to<&OptTarget::name>, "a name"),
             Opt::text("mode", "auto", to<&OptTarget::mode>, "a mode", "auto|on|"),
             Opt::text("elsewhere", "x", nullptr, "read by name elsewhere"),
         }));
const OptionKeys kOptKeys{"optsec", kOptTable};

TEST(Options, DeclaresEveryRowUnderItsSection) {
  auto keys = Config::keys_of("optsec");
  EXPECT_EQ(keys.size(), kOptTable.size());
  auto c = Config::load("");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(*c->get_int("optsec.cq_depth"), 65536);
  EXPECT_EQ(*c->get_string("optsec.elsewhere"), "x");
  const std::string d = c->dump();
  EXPECT_NE(d.find("count = 3  # default; a count\n"), std::string::npos) << d;
  EXPECT_NE(d.find("max_outstanding = 1024  # default; posted sends (and receives) per endpoint"),
            std::string::npos)
      << d;
  auto bad = c->set("optsec.count", "many", "test");
  EXPECT_NE(std::string(bad.message()).find("optsec.count = 'many' is not an integer (a count)"),
            std::string::npos)
      << bad.to_string();
}

TEST(Options, ReadsDefaultsIntoTheirFields) {
  auto c = Config::load("");
  ASSERT_TRUE(c.ok());
  OptTarget t;
  ASSERT_TRUE(read_options(*c, "optsec", kOptTable, &t).ok());
  EXPECT_EQ(t.in.count, 3);
  EXPECT_EQ(t.in.cq_depth, 65536u);
  EXPECT_EQ(t.in.max_message, uint64_t{1} << 40);
  EXPECT_EQ(t.in.unexpected_bytes, 64u << 20);
  EXPECT_EQ(t.in.max_outstanding, 1024u);
  EXPECT_EQ(t.in.staging.chunk_bytes, 512u * 1024);
  EXPECT_EQ(t.in.staging.slots, 8u);
  EXPECT_EQ(t.wait_ns, 5'000'000u);
  EXPECT_TRUE(t.flag);
  EXPECT_EQ(t.name, "abc");
  EXPECT_EQ(t.mode, "auto");
  EXPECT_EQ(t.elsewhere, "untouched");
}

TEST(Options, ErrorsAreConfigReaders) {
  auto c = Config::load("");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->apply_kvargs("optsec", "count=50").ok());
  OptTarget t;
  Status st = read_options(*c, "optsec", kOptTable, &t);
  ConfigReader r(*c);
  r.in("optsec.count", 1, 10, " (a test's limit)");
  EXPECT_EQ(st.to_string(), r.status().to_string());
  // A common row with the driver's own limit; rows are read in order, the first error kept.
  ASSERT_TRUE(c->apply_kvargs("optsec", "count=5,staging_slots=17,mode=off").ok());
  st = read_options(*c, "optsec", kOptTable, &t);
  EXPECT_NE(std::string(st.message())
                .find("optsec.staging_slots = 17 (from device argument "
                      "staging_slots) must be 1..16"),
            std::string::npos)
      << st.to_string();
  ASSERT_TRUE(c->apply_kvargs("optsec", "staging_slots=16").ok());
  st = read_options(*c, "optsec", kOptTable, &t);
  EXPECT_NE(std::string(st.message()).find("must be one of auto, on, "), std::string::npos)
      << st.to_string();
  ASSERT_TRUE(c->apply_kvargs("optsec", "mode=").ok());
  ASSERT_TRUE(read_options(*c, "optsec", kOptTable, &t).ok());
  EXPECT_EQ(t.mode, "");  // the empty choice is one of them
  EXPECT_EQ(t.in.staging.slots, 16u);
}

}  // namespace
}  // namespace gw
