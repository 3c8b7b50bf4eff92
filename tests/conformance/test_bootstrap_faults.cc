// Bootstrap faults: store timeouts on every store kind, and a rank that never shows up is
// named in the error of every rank that did.
#include <filesystem>
#include <set>
#include <thread>

#include "conformance.h"

namespace gw::conformance {
namespace {

enum class StoreKind { kInProcess, kFile, kTcp };

// A store of the kind; `keep` holds what must outlive it (the TCP server, the directory).
struct StoreRig {
  std::shared_ptr<Store> store;
  std::unique_ptr<TcpStoreServer> server;
  std::string dir;
  ~StoreRig() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

void make_store(StoreKind k, StoreRig& r) {
  if (k == StoreKind::kInProcess) {
    r.store = make_in_process_store();
  } else if (k == StoreKind::kFile) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gw-conf-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    r.dir = tmpl;
    auto s = make_file_store(r.dir);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    r.store = *s;
  } else {
    auto srv = TcpStoreServer::start("127.0.0.1", 0);
    ASSERT_TRUE(srv.ok()) << srv.status().to_string();
    r.server = std::move(srv).value();
    auto s = connect_tcp_store("127.0.0.1", r.server->port(), kStepTimeout);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    r.store = *s;
  }
}

std::string store_kind_name(const ::testing::TestParamInfo<StoreKind>& p) {
  static const char* const kNames[] = {"in_process", "file", "tcp"};
  return kNames[static_cast<int>(p.param)];
}

class StoreTimeouts : public ::testing::TestWithParam<StoreKind> {};

TEST_P(StoreTimeouts, GetWaitAndCheckNameWhatIsMissing) {
  StoreRig r;
  make_store(GetParam(), r);
  if (HasFatalFailure()) return;
  Store& s = *r.store;
  ASSERT_TRUE(s.set("conf/present", "v").ok());

  auto t0 = Clock::now();
  auto g = s.get("conf/absent", Millis(150));
  auto ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kTimeout) << g.status().to_string();
  EXPECT_NE(g.status().message().find("conf/absent"), std::string_view::npos)
      << "timeout does not name the key: " << g.status().to_string();
  EXPECT_GE(ms, 149);
  EXPECT_LT(ms, 3000);

  std::vector<std::string> keys = {"conf/present", "conf/miss1", "conf/miss2"};
  t0 = Clock::now();
  Status w = s.wait(keys, Millis(150));
  ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
  EXPECT_EQ(w.code(), Code::kTimeout) << w.to_string();
  EXPECT_NE(w.message().find("conf/miss1"), std::string_view::npos) << w.to_string();
  EXPECT_NE(w.message().find("conf/miss2"), std::string_view::npos) << w.to_string();
  EXPECT_GE(ms, 149);
  EXPECT_LT(ms, 3000);

  auto c = s.check(keys);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(*c);
  auto c1 = s.check({keys.data(), 1});
  ASSERT_TRUE(c1.ok());
  EXPECT_TRUE(*c1);
  auto v = s.get("conf/present", Millis(150));
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, "v");
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreTimeouts,
                         ::testing::Values(StoreKind::kInProcess, StoreKind::kFile,
                                           StoreKind::kTcp),
                         store_kind_name);

TEST(TcpStore, ConnectToNobodyTimesOutNamingTheAddress) {
  // A port that was free a moment ago: bind, read it, close.
  auto srv = TcpStoreServer::start("127.0.0.1", 0);
  ASSERT_TRUE(srv.ok()) << srv.status().to_string();
  uint16_t port = (*srv)->port();
  srv = Status(Code::kUnavailable, "closed");
  auto t0 = Clock::now();
  auto c = connect_tcp_store("127.0.0.1", port, Millis(300));
  auto ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
  ASSERT_FALSE(c.ok()) << "connected to a closed port";
  EXPECT_EQ(c.status().code(), Code::kTimeout) << c.status().to_string();
  EXPECT_NE(c.status().message().find(std::to_string(port)), std::string_view::npos)
      << c.status().to_string();
  EXPECT_GE(ms, 299);
  EXPECT_LT(ms, 3000);
}

using MissingRank = TransportTest;

// Numbers listed after "rank"/"ranks" in an error message ("ranks 2, 5 never ...").
std::set<int> ranks_named(const std::string& msg) {
  auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  std::set<int> out;
  for (size_t pos = msg.find("rank"); pos != std::string::npos; pos = msg.find("rank", pos + 1)) {
    size_t i = pos + 4;
    if (i < msg.size() && msg[i] == 's') ++i;
    while (i < msg.size() && (msg[i] == ' ' || msg[i] == ',' || is_digit(msg[i]))) {
      if (!is_digit(msg[i])) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < msg.size() && is_digit(msg[end])) ++end;
      out.insert(std::stoi(msg.substr(i, end - i)));
      i = end;
    }
  }
  return out;
}

// World of `size`; the ranks in `absent` never start. Every present rank's Group::create
// must time out and name exactly the absent ones.
void expect_missing_named(const TransportCase& c, int size, const std::vector<int>& absent) {
  auto store = make_in_process_store();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    if (std::find(absent.begin(), absent.end(), r) != absent.end()) continue;
    threads.emplace_back([&, r] {
      auto t = open_case(c);
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      auto t0 = Clock::now();
      auto g = Group::create(store, std::move(t).value(), r, size, Millis(500));
      auto ms = std::chrono::duration_cast<Millis>(Clock::now() - t0).count();
      ASSERT_FALSE(g.ok()) << "rank " << r << ": group formed without its missing ranks";
      EXPECT_EQ(g.status().code(), Code::kTimeout) << g.status().to_string();
      EXPECT_LT(ms, 5000) << "rank " << r;
      std::string msg(g.status().message());
      std::set<int> named = ranks_named(msg);
      for (int a : absent) {
        EXPECT_TRUE(named.count(a)) << "rank " << a << " is not named: " << msg;
      }
      for (int p = 0; p < size; ++p) {
        bool present = p != r && std::find(absent.begin(), absent.end(), p) == absent.end();
        EXPECT_FALSE(present && named.count(p)) << "present rank " << p << " named: " << msg;
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST_P(MissingRank, OneMissingRankIsNamed) { expect_missing_named(tc(), 4, {2}); }
TEST_P(MissingRank, SeveralMissingRanksAreNamed) { expect_missing_named(tc(), 6, {2, 5}); }

INSTANTIATE_TEST_SUITE_P(Tr, MissingRank, ::testing::ValuesIn(built_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MissingRank);

}  // namespace
}  // namespace gw::conformance
