// discover_launch() for each launcher's variables, bad values, and store_for_launch().
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "gw_store.h"
#include "store_test_util.h"

namespace gw {
namespace {

using namespace std::chrono_literals;

const char* const kVars[] = {"GW_RANK",
                             "GW_WORLD_SIZE",
                             "GW_MASTER_ADDR",
                             "GW_MASTER_PORT",
                             "RANK",
                             "WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "SLURM_PROCID",
                             "SLURM_NTASKS"};

/// Clears every launcher variable for the test and restores them afterwards.
class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    for (auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  static void set(std::map<std::string, std::string> vars) {
    for (auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  /// Expects InvalidArgument whose message names `var`.
  static void expect_bad(const std::string& var) {
    auto info = discover_launch();
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(info.status().code(), Code::kInvalidArgument);
    EXPECT_NE(info.status().message().find(var), std::string_view::npos)
        << info.status().to_string();
  }

  /// Expects discover_launch() to give exactly `want`.
  static void expect_launch(const LaunchInfo& want) {
    auto info = discover_launch();
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->rank, want.rank);
    EXPECT_EQ(info->world_size, want.world_size);
    EXPECT_EQ(info->master_addr, want.master_addr);
    EXPECT_EQ(info->master_port, want.master_port);
    EXPECT_EQ(info->source, want.source);
  }

  std::map<std::string, std::string> saved_;
};

TEST_F(LaunchTest, NothingSetIsUnavailable) {
  auto info = discover_launch();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), Code::kUnavailable);
  EXPECT_NE(info.status().message().find("GW_RANK"), std::string_view::npos);
}

TEST_F(LaunchTest, Gradwire) {
  set({{"GW_RANK", "2"},
       {"GW_WORLD_SIZE", "4"},
       {"GW_MASTER_ADDR", "10.0.0.1"},
       {"GW_MASTER_PORT", "29500"}});
  expect_launch({2, 4, "10.0.0.1", 29500, "gradwire"});
}

TEST_F(LaunchTest, Torchrun) {
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "1234"}});
  expect_launch({1, 2, "node0", 1234, "torchrun"});
}

TEST_F(LaunchTest, OpenMpiTakesTheMasterFromGradwireOrTorchVariables) {
  set({{"OMPI_COMM_WORLD_RANK", "3"},
       {"OMPI_COMM_WORLD_SIZE", "8"},
       {"MASTER_ADDR", "torch-host"},
       {"MASTER_PORT", "1111"},
       {"GW_MASTER_ADDR", "gw-host"}});
  expect_launch({3, 8, "gw-host", 1111, "Open MPI"});  // GW_MASTER_ADDR wins over MASTER_ADDR
}

TEST_F(LaunchTest, Slurm) {
  set({{"SLURM_PROCID", "0"},
       {"SLURM_NTASKS", "16"},
       {"GW_MASTER_ADDR", "::1"},
       {"GW_MASTER_PORT", "65535"}});
  expect_launch({0, 16, "::1", 65535, "Slurm"});
}

TEST_F(LaunchTest, GradwireVariablesWinOverTheOthers) {
  set({{"GW_RANK", "1"},
       {"GW_WORLD_SIZE", "2"},
       {"GW_MASTER_ADDR", "a"},
       {"GW_MASTER_PORT", "5"},
       {"RANK", "0"},
       {"WORLD_SIZE", "9"},
       {"SLURM_PROCID", "7"},
       {"SLURM_NTASKS", "9"}});
  expect_launch({1, 2, "a", 5, "gradwire"});
}

TEST_F(LaunchTest, SingleRankNeedsNoMaster) {
  set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  expect_launch({0, 1, "127.0.0.1", 0, "Slurm"});
}

TEST_F(LaunchTest, BadValuesNameTheVariable) {
  const std::map<std::string, std::string> good = {{"GW_RANK", "1"},
                                                   {"GW_WORLD_SIZE", "4"},
                                                   {"GW_MASTER_ADDR", "h"},
                                                   {"GW_MASTER_PORT", "29500"}};
  const std::pair<const char*, const char*> cases[] = {
      {"GW_RANK", "abc"},      {"GW_RANK", "3x"},           {"GW_RANK", "-1"},
      {"GW_RANK", "4"},        {"GW_WORLD_SIZE", "0"},      {"GW_WORLD_SIZE", "two"},
      {"GW_MASTER_PORT", "0"}, {"GW_MASTER_PORT", "65536"}, {"GW_MASTER_PORT", "80a"},
  };
  for (auto [var, value] : cases) {
    SCOPED_TRACE(std::string(var) + "=" + value);
    set(good);
    ::setenv(var, value, 1);
    expect_bad(var);
  }
}

TEST_F(LaunchTest, MissingVariablesAreNamed) {
  set({{"GW_RANK", "1"}, {"GW_MASTER_ADDR", "h"}, {"GW_MASTER_PORT", "1"}});
  expect_bad("GW_WORLD_SIZE");
  ::unsetenv("GW_RANK");
  set({{"GW_WORLD_SIZE", "2"}});
  expect_bad("GW_RANK");
  ::unsetenv("GW_MASTER_PORT");
  set({{"GW_RANK", "1"}});
  expect_bad("GW_MASTER_PORT");
  set({{"GW_MASTER_PORT", "1"}});
  ::unsetenv("GW_MASTER_ADDR");
  expect_bad("GW_MASTER_ADDR");
}

TEST(StoreForLaunch, RankZeroServesAndEveryRankConnects) {
  uint16_t port = test::free_port();
  ASSERT_NE(port, 0);
  constexpr int kRanks = 3;
  std::vector<Result<std::shared_ptr<Store>>> stores(kRanks, Status(Code::kInternal, "unset"));
  std::vector<std::thread> threads;
  // Ranks 1 and 2 start first: they must wait for rank 0's server.
  for (int r = kRanks - 1; r >= 0; --r) {
    threads.emplace_back([&, r] {
      LaunchInfo info{r, kRanks, "127.0.0.1", port, "gradwire"};
      stores[r] = store_for_launch(info, 20s);
      if (!stores[r].ok()) return;
      EXPECT_TRUE((*stores[r])->add("joined", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(stores[r].ok()) << stores[r].status().to_string();
  EXPECT_EQ((*stores[0])->add("joined", 0).value(), kRanks);
  ASSERT_TRUE((*stores[2])->set("from2", "hi").ok());
  EXPECT_EQ((*stores[1])->get("from2", 20s).value(), "hi");
  // Rank 0's store owns the server: once it is gone, the others see the server gone.
  stores[0] = Status(Code::kInternal, "dropped");
  auto v = (*stores[1])->get("from2", 20s);
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.status().code(), Code::kTimeout) << v.status().to_string();
}

// A launcher's store port lies below the kernel's ephemeral range (no connect() on the host
// can take it before rank 0 binds it), differs between calls, and rank 0 can serve on it.
TEST(StoreForLaunch, PickedPortIsBelowTheEphemeralRangeAndServes) {
  int low = 32768, high = 60999;
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  ASSERT_TRUE(f >> low >> high);
  std::set<uint16_t> seen;
  for (int i = 0; i < 8; ++i) {
    auto p = pick_store_port();
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_LT(*p, low);
    EXPECT_GE(*p, 1024);
    seen.insert(*p);
  }
  EXPECT_GT(seen.size(), 1u) << "the same port every time";
  auto p = pick_store_port();
  ASSERT_TRUE(p.ok());
  auto server = TcpStoreServer::start("", *p);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  EXPECT_EQ((*server)->port(), *p);
}

TEST(StoreForLaunch, SingleRankWithoutPort) {
  LaunchInfo info{0, 1, "127.0.0.1", 0, "gradwire"};
  auto s = store_for_launch(info, 20s);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE((*s)->set("k", "v").ok());
  EXPECT_EQ((*s)->get("k", 1s).value(), "v");
}

}  // namespace
}  // namespace gw
