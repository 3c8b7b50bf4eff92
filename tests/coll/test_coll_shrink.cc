// Communicator::shrink and grow with ranks as threads, on every transport the coll binary runs
// over (tcp in `coll`, the DPDK ring bus in `coll-dpdk`): rank 3 of 4 dies inside an
// allreduce (its communicator, group and transport go, so its peers see its connections
// close); the others shrink, and the allreduce over the three is right element by element;
// then they grow back to four with a new rank on a fresh transport, and the four agree on
// every element again. Processes and SIGKILL: tests/coll/shrink_kill.py.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "coll_harness.h"

namespace gw {
namespace {

using coll_test::transport_spec;

constexpr size_t kCount = 300'000;  // several ring chunks

float value(int id, size_t i) { return static_cast<float>(id * 1000 + static_cast<int>(i % 977)); }

// Every element of `out` against the sum over `ids`.
size_t wrong(const std::vector<float>& out, const std::vector<int>& ids) {
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    float ref = 0;
    for (int id : ids) ref += value(id, i);
    bad += out[i] != ref;
  }
  return bad;
}

Status sum(Communicator& c, int id, std::vector<float>& out) {
  std::vector<float> in(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = value(id, i);
  out.assign(kCount, 0.f);
  return c.allreduce(in.data(), out.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
}

TEST(CollShrink, DeadRankShrinkThenRegrowToFour) {
  const int n = 4, victim = 3, newcomer = 7;
  auto store = make_in_process_store();
  CommOptions o;
  o.timeout = Millis(10000);
  o.chunk_bytes = 64 << 10;
  std::atomic<bool> dead{false};
  std::vector<std::string> errors(n + 1);
  auto note = [&](int r, const Status& st, const char* what) {
    if (!st.ok() && errors[static_cast<size_t>(r)].empty())
      errors[static_cast<size_t>(r)] = std::string(what) + ": " + st.to_string();
  };
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto t = Transport::open(transport_spec());
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      auto g = Group::create(store, std::move(*t), r, n, Millis(20000), "shrinkt");
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      auto c = Communicator::create(**g, o);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      std::unique_ptr<Communicator> comm = std::move(*c);
      std::vector<float> out;
      note(r, sum(*comm, r, out), "first allreduce");
      EXPECT_EQ(wrong(out, {0, 1, 2, 3}), 0u) << "rank " << r;
      std::vector<float> in(kCount, 1.f);
      if (r == victim) {  // dies inside a ring allreduce (started, never driven: no one ends it)
        out.assign(kCount, 0.f);
        auto h = comm->allreduce_async(in.data(), out.data(), kCount, DataType::kFloat32,
                                       ReduceOp::kSum, {.algo = Algo::kRing});
        EXPECT_TRUE(h.ok());
        comm.reset();
        g->reset();
        dead = true;
        return;
      }
      Status st = comm->allreduce(in.data(), out.data(), kCount, DataType::kFloat32, ReduceOp::kSum,
                                  {.algo = Algo::kRing});
      // RemoteError or Timeout naming rank 3, or Aborted: a survivor that learnt first may
      // have started the shrink already.
      EXPECT_TRUE(st.code() == Code::kRemoteError || st.code() == Code::kTimeout ||
                  st.code() == Code::kAborted)
          << st.to_string();
      auto s = comm->shrink();
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.status().to_string();
      EXPECT_EQ((*s)->size(), 3);
      EXPECT_EQ((*s)->rank(), r);
      EXPECT_EQ((*s)->group().prefix(), "shrinkt.s1");
      EXPECT_EQ((*s)->group().epoch(), comm->group().epoch() + 1);
      EXPECT_FALSE(comm->barrier().ok());  // the old one stays broken
      // The flight recorder moved to the new communicator (its old calls left behind).
      EXPECT_EQ(comm->dump_flight_record().status().code(), Code::kNotSupported);
      EXPECT_TRUE((*s)->flight_records().empty());
      comm = std::move(*s);
      note(r, sum(*comm, r, out), "allreduce of three");
      EXPECT_EQ(wrong(out, {0, 1, 2}), 0u) << "rank " << r;
      auto rec = comm->flight_records();
      ASSERT_EQ(rec.size(), 1u) << "rank " << r;
      EXPECT_EQ(rec.back().count, kCount);
      auto grown = comm->grow(1, "shrinkt/grow", Millis(20000));
      ASSERT_TRUE(grown.ok()) << "rank " << r << ": " << grown.status().to_string();
      comm = std::move(*grown);
      EXPECT_EQ(comm->size(), 4);
      EXPECT_EQ(comm->group().parent_rank(3), -1);
      note(r, sum(*comm, r, out), "allreduce of four");
      EXPECT_EQ(wrong(out, {0, 1, 2, newcomer}), 0u) << "rank " << r;
      note(r, comm->barrier(), "last barrier");
    });
  }
  th.emplace_back([&] {  // the replacement, once the victim is gone
    while (!dead) std::this_thread::sleep_for(Millis(1));
    auto t = Transport::open(transport_spec());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    auto c = Communicator::join(store, std::move(*t), "shrinkt/grow", Millis(20000), o);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ((*c)->rank(), 3);
    std::vector<float> out;
    note(n, sum(**c, newcomer, out), "newcomer's allreduce");
    EXPECT_EQ(wrong(out, {0, 1, 2, newcomer}), 0u);
    note(n, (*c)->barrier(), "newcomer's barrier");
  });
  for (auto& t : th) t.join();
  for (int r = 0; r <= n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "thread " << r;
}

}  // namespace
}  // namespace gw
