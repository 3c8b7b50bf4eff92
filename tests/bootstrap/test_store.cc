// Behaviour every Store must have, run over each implementation.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "gw_store.h"
#include "store_test_util.h"

namespace gw {
namespace {

using namespace std::chrono_literals;

using test::kLong;
constexpr Nanos kShort = 50ms;

/// Makes stores of one kind; another() is a second handle onto the same data.
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& kind = GetParam();
    if (kind == "in_process") {
      inner_ = make_in_process_store();
    } else if (kind == "prefix") {
      inner_ = make_in_process_store();
    } else if (kind == "file") {
      ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed";
    } else {
      std::string host = kind == "tcp_ipv6" ? "::1" : "127.0.0.1";
      auto server = TcpStoreServer::start(host, 0);
      if (!server.ok() && kind == "tcp_ipv6") {
        GTEST_SKIP() << "IPv6 loopback unavailable here: " << server.status().to_string();
      }
      ASSERT_TRUE(server.ok()) << server.status().to_string();
      server_ = std::move(*server);
      host_ = host;
    }
    store_ = another();
    ASSERT_NE(store_, nullptr);
  }

  std::shared_ptr<Store> another() {
    const std::string& kind = GetParam();
    if (kind == "in_process") return inner_;
    if (kind == "prefix") return make_prefix_store(inner_, "job7");
    if (kind == "file") {
      auto s = make_file_store(dir_.path());
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      return s.ok() ? *s : nullptr;
    }
    auto s = connect_tcp_store(host_, server_->port(), kLong);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? *s : nullptr;
  }

  test::TempDir dir_;
  std::shared_ptr<Store> inner_;
  std::unique_ptr<TcpStoreServer> server_;
  std::string host_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreTest, SetThenGetReturnsTheValue) {
  ASSERT_TRUE(store_->set("alpha", "1").ok());
  auto v = store_->get("alpha", kLong);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "1");
  ASSERT_TRUE(store_->set("alpha", "overwritten").ok());
  EXPECT_EQ(store_->get("alpha", kLong).value(), "overwritten");
}

TEST_P(StoreTest, UnboundedTimeoutsDoNotOverflow) {
  ASSERT_TRUE(store_->set("k", "v").ok());
  EXPECT_EQ(store_->get("k", Nanos::max()).value(), "v");
  std::vector<std::string> keys = {"k"};
  EXPECT_TRUE(store_->wait(keys, Nanos::max()).ok());
  EXPECT_EQ(store_->get("absent", Nanos::min()).status().code(), Code::kTimeout);
}

TEST_P(StoreTest, KeysAndValuesAreArbitraryBytes) {
  std::string key("a/b\0c\xff %/..", 12), value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));
  ASSERT_TRUE(store_->set(key, value).ok());
  ASSERT_TRUE(store_->set("empty", "").ok());
  auto v = another()->get(key, kLong);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->size(), value.size());
  for (size_t i = 0; i < value.size(); ++i) EXPECT_EQ((*v)[i], value[i]) << "byte " << i;
  EXPECT_EQ(store_->get("empty", kLong).value(), "");
  // A key differing only after the NUL byte is a different key.
  EXPECT_FALSE(store_->check({{std::string("a/b\0d", 5)}}).value());
}

TEST_P(StoreTest, SecondHandleSeesTheSameData) {
  auto other = another();
  ASSERT_TRUE(store_->set("shared", "yes").ok());
  EXPECT_EQ(other->get("shared", kLong).value(), "yes");
}

TEST_P(StoreTest, GetWaitsForALaterSetFromAnotherThread) {
  auto writer_store = another();
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    EXPECT_TRUE(writer_store->set("late", "arrived").ok());
  });
  auto v = store_->get("late", kLong);
  writer.join();
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "arrived");
}

TEST_P(StoreTest, WaitReturnsOnceEveryKeyIsSet) {
  auto writer_store = another();
  std::thread writer([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(10ms);
      EXPECT_TRUE(writer_store->set("w" + std::to_string(i), "x").ok());
    }
  });
  std::vector<std::string> keys = {"w0", "w1", "w2"};
  Status s = store_->wait(keys, kLong);
  writer.join();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(store_->check(keys).value());
}

// Keys are quoted in errors; the prefix store shows the full key ('job7/...').
TEST_P(StoreTest, GetTimeoutNamesTheKey) {
  auto v = store_->get("no-such-key", kShort);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kTimeout);
  EXPECT_NE(v.status().message().find("no-such-key'"), std::string_view::npos)
      << v.status().to_string();
}

TEST_P(StoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  ASSERT_TRUE(store_->set("here", "1").ok());
  std::vector<std::string> keys = {"here", "gone1", "gone2"};
  Status s = store_->wait(keys, kShort);
  ASSERT_EQ(s.code(), Code::kTimeout) << s.to_string();
  auto m = s.message();
  EXPECT_NE(m.find("gone1'"), std::string_view::npos) << m;
  EXPECT_NE(m.find("gone2'"), std::string_view::npos) << m;
  EXPECT_EQ(m.find("here'"), std::string_view::npos) << m;
}

TEST_P(StoreTest, CheckDoesNotWait) {
  std::vector<std::string> none;
  EXPECT_TRUE(store_->check(none).value());
  std::vector<std::string> keys = {"c1", "c2"};
  EXPECT_FALSE(store_->check(keys).value());
  ASSERT_TRUE(store_->set("c1", "").ok());
  EXPECT_FALSE(store_->check(keys).value());
  ASSERT_TRUE(store_->set("c2", "").ok());
  EXPECT_TRUE(store_->check(keys).value());
}

TEST_P(StoreTest, AddCreatesAtZeroAndAccumulates) {
  EXPECT_EQ(store_->add("n", 5).value(), 5);
  EXPECT_EQ(store_->add("n", -7).value(), -2);
  EXPECT_EQ(store_->get("n", kLong).value(), "-2");
  ASSERT_TRUE(store_->set("text", "abc").ok());
  auto bad = store_->add("text", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("text'"), std::string_view::npos);
}

TEST_P(StoreTest, AddIsAtomicAcrossThreads) {
  constexpr int kThreads = 4, kAdds = 100;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, s = another()] {
      for (int i = 0; i < kAdds; ++i) {
        auto v = s->add("counter", 1);
        ASSERT_TRUE(v.ok()) << v.status().to_string();
        seen[t].push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every add returned a distinct value: together exactly 1..N.
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), size_t{kThreads * kAdds});
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<int64_t>(i + 1));
  EXPECT_EQ(store_->add("counter", 0).value(), kThreads * kAdds);
}

TEST_P(StoreTest, OversizedValueIsRefusedBeforeSending) {
  std::string big((size_t{64} << 20) + 1, 'x');
  Status s = store_->set("big", big);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  EXPECT_FALSE(store_->check({{"big"}}).value());
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest,
                         ::testing::Values("in_process", "prefix", "file", "tcp_ipv4", "tcp_ipv6"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(PrefixStore, PutsThePrefixBeforeEveryKey) {
  auto inner = make_in_process_store();
  auto a = make_prefix_store(inner, "a"), b = make_prefix_store(inner, "b");
  ASSERT_TRUE(a->set("k", "from a").ok());
  ASSERT_TRUE(b->set("k", "from b").ok());
  EXPECT_EQ(inner->get("a/k", kLong).value(), "from a");
  EXPECT_EQ(inner->get("b/k", kLong).value(), "from b");
  EXPECT_EQ(a->add("n", 2).value(), 2);
  EXPECT_EQ(inner->get("a/n", kLong).value(), "2");
  Status s = a->wait(std::vector<std::string>{"k", "absent"}, kShort);
  EXPECT_NE(s.message().find("'a/absent'"), std::string_view::npos) << s.to_string();
}

TEST(FileStore, AddIsAtomicAcrossProcesses) {
  test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  constexpr int kProcs = 4, kAdds = 50;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: record every value add() returned; a duplicate would overwrite, a gap shows.
      auto s = make_file_store(dir.path());
      if (!s.ok()) ::_exit(2);
      for (int i = 0; i < kAdds; ++i) {
        auto v = (*s)->add("counter", 1);
        if (!v.ok() || !(*s)->add("seen/" + std::to_string(*v), 1).ok()) ::_exit(3);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  auto s = make_file_store(dir.path());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->add("counter", 0).value(), kProcs * kAdds);
  for (int v = 1; v <= kProcs * kAdds; ++v) {
    EXPECT_EQ((*s)->get("seen/" + std::to_string(v), kShort).value(), "1") << "value " << v;
  }
}

TEST(FileStore, RefusesAPathThatIsAFile) {
  test::TempDir dir;
  std::string file = dir.path() + "/plain";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto s = make_file_store(file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(file), std::string_view::npos);
}

TEST(FileStore, LongKeysStillWork) {
  test::TempDir dir;
  auto s = make_file_store(dir.path());
  ASSERT_TRUE(s.ok());
  std::string k1(1000, 'k'), k2 = k1 + "2";
  ASSERT_TRUE((*s)->set(k1, "one").ok());
  ASSERT_TRUE((*s)->set(k2, "two").ok());
  EXPECT_EQ((*s)->get(k1, kShort).value(), "one");
  EXPECT_EQ((*s)->get(k2, kShort).value(), "two");
}

}  // namespace
}  // namespace gw
