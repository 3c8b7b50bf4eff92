// Group::create over a recording fake transport: which pairs connect, with which keys and
// roles, in which order, and how it fails. (Transfers over real drivers: test_group.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gw_group.h"

namespace gw {
namespace {

using namespace std::chrono_literals;

struct Call {
  int rank;
  ConnectParams params;
};

/// Shared by the fake transports of one test.
struct Recorder {
  std::mutex mu;
  std::vector<Call> calls;  // in the order each rank made them
  int fail_rank = -1, fail_peer = -1;
};

class FakeEndpoint final : public Endpoint {
 public:
  explicit FakeEndpoint(uint32_t peer) { peer_id_ = peer; }
  Result<size_t> post_send(std::span<const SendRequest>) override { return size_t{0}; }
  Result<size_t> post_recv(std::span<const RecvRequest>) override { return size_t{0}; }
  Status status() const override { return Status(); }
};

class FakeCq final : public CompletionQueue {
 public:
  Result<size_t> poll(std::span<Completion>) override { return size_t{0}; }
  int wait_fd() const override { return -1; }
};

class FakeTransport final : public Transport {
 public:
  FakeTransport(Recorder* rec, int rank, std::string driver) : rec_(rec), rank_(rank) {
    uint8_t payload[1] = {static_cast<uint8_t>(rank)};
    addr_ = Address::make(driver, 1, payload).value();
    props_.name = driver;
  }
  const TransportProperties& properties() const override { return props_; }
  const Address& address() const override { return addr_; }
  Result<std::unique_ptr<Endpoint>> connect(const ConnectParams& p, Deadline) override {
    std::lock_guard lock(rec_->mu);
    rec_->calls.push_back({rank_, p});
    if (rank_ == rec_->fail_rank && static_cast<int>(p.peer_id) == rec_->fail_peer) {
      return Status(Code::kUnavailable, "fake refusal");
    }
    return std::unique_ptr<Endpoint>(std::make_unique<FakeEndpoint>(p.peer_id));
  }
  Result<MemoryRegion> register_memory(void*, size_t, MemKind) override {
    return Status(Code::kNotSupported, "fake");
  }
  Result<size_t> post_recv_any(std::span<const RecvRequest>) override { return size_t{0}; }
  CompletionQueue& cq() override { return cq_; }
  std::map<std::string, uint64_t> stats() const override { return {}; }

 private:
  Recorder* rec_;
  int rank_;
  Address addr_;
  TransportProperties props_;
  FakeCq cq_;
};

/// Runs Group::create for `ranks` (a subset of 0..size-1) as threads.
std::vector<Result<std::unique_ptr<Group>>> run_ranks(Recorder& rec, std::shared_ptr<Store> store,
                                                      int size, std::vector<int> ranks,
                                                      Nanos timeout,
                                                      const std::string& prefix = "gw",
                                                      int odd_driver_rank = -1) {
  std::vector<Result<std::unique_ptr<Group>>> out;
  for (size_t i = 0; i < ranks.size(); ++i) out.emplace_back(Status(Code::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      int r = ranks[i];
      auto t = std::make_unique<FakeTransport>(&rec, r, r == odd_driver_rank ? "other" : "fake");
      out[i] = Group::create(store, std::move(t), r, size, timeout, prefix);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(GroupLogic, EveryPairConnectsOnceFromEachSideWithOneKey) {
  for (int size = 2; size <= 4; ++size) {
    SCOPED_TRACE("size " + std::to_string(size));
    Recorder rec;
    std::vector<int> ranks(size);
    for (int r = 0; r < size; ++r) ranks[r] = r;
    auto groups = run_ranks(rec, make_in_process_store(), size, ranks, 20s);
    for (int r = 0; r < size; ++r) {
      ASSERT_TRUE(groups[r].ok()) << groups[r].status().to_string();
      EXPECT_EQ((*groups[r])->rank(), r);
      EXPECT_EQ((*groups[r])->size(), size);
      for (int p = 0; p < size; ++p) {
        if (p == r) continue;
        EXPECT_EQ((*groups[r])->endpoint(p).peer_id(), static_cast<uint32_t>(p));
      }
    }
    ASSERT_EQ(rec.calls.size(), static_cast<size_t>(size * (size - 1)));
    std::set<uint64_t> keys;
    for (int a = 0; a < size; ++a) {
      for (int b = a + 1; b < size; ++b) {
        auto find = [&](int from, int to) -> const ConnectParams* {
          for (auto& c : rec.calls)
            if (c.rank == from && c.params.peer_id == static_cast<uint32_t>(to)) return &c.params;
          return nullptr;
        };
        const ConnectParams* lo = find(a, b);
        const ConnectParams* hi = find(b, a);
        ASSERT_NE(lo, nullptr);
        ASSERT_NE(hi, nullptr);
        EXPECT_EQ(lo->key, hi->key) << a << "-" << b;
        EXPECT_TRUE(lo->active) << "lower rank " << a << " dials " << b;
        EXPECT_FALSE(hi->active) << "higher rank " << b << " accepts " << a;
        EXPECT_EQ(lo->peer_name, "rank " + std::to_string(b));
        EXPECT_EQ(hi->peer_name, "rank " + std::to_string(a));
        // Each side got the other's published address.
        ASSERT_EQ(lo->remote.payload().size(), 1u);
        EXPECT_EQ(lo->remote.payload()[0], b);
        EXPECT_EQ(hi->remote.payload()[0], a);
        EXPECT_TRUE(keys.insert(lo->key).second) << "key of " << a << "-" << b << " reused";
      }
    }
  }
}

TEST(GroupLogic, EachRankDialsAllBeforeAcceptingAny) {
  Recorder rec;
  auto groups = run_ranks(rec, make_in_process_store(), 4, {0, 1, 2, 3}, 20s);
  for (auto& g : groups) ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (int r = 0; r < 4; ++r) {
    bool passive_seen = false;
    for (auto& c : rec.calls) {
      if (c.rank != r) continue;
      if (!c.params.active) passive_seen = true;
      EXPECT_FALSE(c.params.active && passive_seen) << "rank " << r << " dialled after accepting";
    }
  }
}

TEST(GroupLogic, PrefixesGiveDifferentKeys) {
  Recorder rec;
  auto store = make_in_process_store();
  auto a = run_ranks(rec, store, 2, {0, 1}, 20s, "job-a");
  auto b = run_ranks(rec, store, 2, {0, 1}, 20s, "job-b");
  for (auto* v : {&a, &b})
    for (auto& g : *v) ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(rec.calls.size(), 4u);
  EXPECT_NE(rec.calls[0].params.key, rec.calls[2].params.key);
}

TEST(GroupLogic, MissingRankTimesOutNamingIt) {
  Recorder rec;
  auto groups = run_ranks(rec, make_in_process_store(), 3, {0, 1}, 200ms);
  for (auto& g : groups) {
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), Code::kTimeout);
    auto m = std::string(g.status().message());
    EXPECT_NE(m.find("rank 2 never published"), std::string::npos) << m;
    EXPECT_NE(m.find("prefix gw"), std::string::npos) << m;
  }
  EXPECT_TRUE(rec.calls.empty());
}

TEST(GroupLogic, SeveralMissingRanksAreAllNamed) {
  Recorder rec;
  auto groups = run_ranks(rec, make_in_process_store(), 6, {0, 1, 3, 4}, 200ms);
  ASSERT_FALSE(groups[0].ok());
  EXPECT_NE(groups[0].status().message().find("ranks 2, 5 never published"), std::string_view::npos)
      << groups[0].status().to_string();
}

TEST(GroupLogic, DriverMismatchNamesRankAndBothDrivers) {
  Recorder rec;
  auto groups = run_ranks(rec, make_in_process_store(), 2, {0, 1}, 20s, "gw", 1);
  ASSERT_FALSE(groups[0].ok());
  auto m = std::string(groups[0].status().message());
  EXPECT_EQ(groups[0].status().code(), Code::kInvalidArgument);
  EXPECT_NE(m.find("rank 1"), std::string::npos) << m;
  EXPECT_NE(m.find("'other'"), std::string::npos) << m;
  EXPECT_NE(m.find("'fake'"), std::string::npos) << m;
}

TEST(GroupLogic, ConnectErrorNamesBothRanks) {
  Recorder rec;
  rec.fail_rank = 0;
  rec.fail_peer = 1;
  auto groups = run_ranks(rec, make_in_process_store(), 2, {0, 1}, 20s);
  ASSERT_FALSE(groups[0].ok());
  EXPECT_EQ(groups[0].status().code(), Code::kUnavailable);
  EXPECT_NE(groups[0].status().message().find("group rank 0: connect to rank 1: fake refusal"),
            std::string_view::npos)
      << groups[0].status().to_string();
}

TEST(GroupLogic, SizeOneHasNoEndpoints) {
  Recorder rec;
  auto groups = run_ranks(rec, make_in_process_store(), 1, {0}, 1s);
  ASSERT_TRUE(groups[0].ok()) << groups[0].status().to_string();
  EXPECT_EQ((*groups[0])->size(), 1);
  EXPECT_TRUE(rec.calls.empty());
}

TEST(GroupLogic, BadRankOrSizeIsInvalidArgument) {
  Recorder rec;
  for (auto [rank, size] : {std::pair{3, 3}, {-1, 2}, {0, 0}}) {
    auto g = Group::create(make_in_process_store(),
                           std::make_unique<FakeTransport>(&rec, 0, "fake"), rank, size, 1s);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), Code::kInvalidArgument) << rank << "/" << size;
  }
}

}  // namespace
}  // namespace gw
