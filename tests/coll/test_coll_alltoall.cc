// alltoall (Bruck and pairwise), alltoallv, gather and scatter at 1..6 ranks, checked element by
// element against values every rank computes on its own: element k of the part rank `src`
// sends to rank `dst` is value(src, dst, k), exact in every dtype.
#include <numeric>

#include "coll_harness.h"

namespace gw::coll_test {
namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                                  DataType::kUInt8};

double value(DataType dt, int src, int dst, size_t k) {
  const size_t h = static_cast<size_t>(src) * 31 + static_cast<size_t>(dst) * 17 + k * 7;
  const double v = static_cast<double>(h % 61);
  return is_int(dt) ? v : v / 4;
}

void fill(DataType dt, uint8_t* p, int src, int dst, size_t count) {
  for (size_t k = 0; k < count; ++k)
    from_double(dt, value(dt, src, dst, k), p + k * dtype_size(dt));
}

// Wrong elements of the part `src` sent to `dst`, found at p (reports the first).
size_t check(DataType dt, const uint8_t* p, int src, int dst, size_t count,
             const std::string& what) {
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    const double got = to_double(dt, p + k * dtype_size(dt)), want = value(dt, src, dst, k);
    if (got != want && ++wrong == 1)
      ADD_FAILURE() << what << ": element " << k << " from rank " << src << " to rank " << dst
                    << " = " << got << ", expected " << want;
  }
  return wrong;
}

// Small chunks, and the tree for gather/scatter blocks up to 4 KiB (off by default): the
// sizes below run both the tree and the direct path.
CommOptions a2a_options() {
  CommOptions o = small_chunks();
  o.gather_tree_max_bytes = 4096;
  return o;
}

std::string name(const char* op, DataType dt, size_t count, int n) {
  return std::string(op) + " " + dtype_name(dt) + " x" + std::to_string(count) + " at " +
         std::to_string(n) + " ranks";
}

// Counts are 4 times larger than needed for every dtype: 1 element, Bruck's largest block of
// float32 (1024 x 4 B = the default 4096), the smallest pairwise one, and a larger one.
void alltoall_case(Communicator& c, DataType dt, size_t count) {
  const int n = c.size(), r = c.rank();
  const size_t b = count * dtype_size(dt);
  std::vector<uint8_t> send(b * static_cast<size_t>(n)), recv(send.size(), 0xEE);
  for (int j = 0; j < n; ++j) fill(dt, send.data() + static_cast<size_t>(j) * b, r, j, count);
  const std::string what = name("alltoall", dt, count, n);
  ASSERT_TRUE(c.alltoall(send.data(), recv.data(), count, dt).ok()) << what;
  for (int i = 0; i < n; ++i)
    check(dt, recv.data() + static_cast<size_t>(i) * b, i, r, count, what);
}

class A2aRanks : public ::testing::TestWithParam<int> {};

TEST_P(A2aRanks, AlltoallEveryDtypeAndSize) {
  run_ranks(GetParam(), a2a_options(), [](int, std::unique_ptr<Rank>& rk) {
    for (DataType dt : kAllTypes) alltoall_case(*rk->comm, dt, 3);
    for (size_t count : {size_t{1}, size_t{1024}, size_t{1025}, size_t{5000}})
      alltoall_case(*rk->comm, DataType::kFloat32, count);
  });
}

// Rank src sends (src * 3 + dst * 5 + salt) % 4 * scale elements to dst: zero-length parts
// included, and no two neighbours alike. Parts are laid out backwards with a gap of one
// element, so displacements matter.
size_t part(int src, int dst, int salt, size_t scale) {
  return static_cast<size_t>((src * 3 + dst * 5 + salt) % 4) * scale;
}

void layout(int n, const std::function<size_t(int)>& count, std::vector<size_t>* counts,
            std::vector<size_t>* displs, size_t* total) {
  counts->assign(static_cast<size_t>(n), 0);
  displs->assign(static_cast<size_t>(n), 0);
  *total = 0;
  for (int j = n - 1; j >= 0; --j) {
    (*counts)[static_cast<size_t>(j)] = count(j);
    (*displs)[static_cast<size_t>(j)] = *total;
    *total += count(j) + 1;
  }
}

void alltoallv_case(Communicator& c, DataType dt, int salt, size_t scale) {
  const int n = c.size(), r = c.rank();
  const size_t es = dtype_size(dt);
  std::vector<size_t> sc, sd, rc, rd;
  size_t st = 0, rt = 0;
  layout(
      n, [&](int j) { return part(r, j, salt, scale); }, &sc, &sd, &st);
  layout(
      n, [&](int i) { return part(i, r, salt, scale); }, &rc, &rd, &rt);
  std::vector<uint8_t> send(st * es), recv(rt * es, 0xEE);
  for (int j = 0; j < n; ++j) fill(dt, send.data() + sd[j] * es, r, j, sc[j]);
  const std::string what = name("alltoallv", dt, scale, n) + " salt " + std::to_string(salt);
  ASSERT_TRUE(
      c.alltoallv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), dt).ok())
      << what;
  for (int i = 0; i < n; ++i) check(dt, recv.data() + rd[i] * es, i, r, rc[i], what);
}

TEST_P(A2aRanks, AlltoallvUnevenWithEmptyParts) {
  run_ranks(GetParam(), a2a_options(), [](int, std::unique_ptr<Rank>& rk) {
    for (DataType dt : kAllTypes) alltoallv_case(*rk->comm, dt, 1, 5);
    for (int salt = 0; salt < 4; ++salt) alltoallv_case(*rk->comm, DataType::kInt32, salt, 700);
  });
}

TEST_P(A2aRanks, GatherScatterEveryRoot) {
  run_ranks(GetParam(), a2a_options(), [](int r, std::unique_ptr<Rank>& rk) {
    Communicator& c = *rk->comm;
    const int n = c.size();
    for (DataType dt : kAllTypes) {
      for (size_t count : {size_t{5}, size_t{3000}}) {
        const size_t b = count * dtype_size(dt);
        for (int root = 0; root < n; ++root) {
          std::vector<uint8_t> mine(b), all(b * static_cast<size_t>(n), 0xEE);
          fill(dt, mine.data(), r, root, count);
          const std::string g = name("gather", dt, count, n) + " root " + std::to_string(root);
          ASSERT_TRUE(c.gather(mine.data(), r == root ? all.data() : nullptr, count, dt, root).ok())
              << g;
          for (int i = 0; r == root && i < n; ++i)
            check(dt, all.data() + static_cast<size_t>(i) * b, i, root, count, g);
          for (int j = 0; r == root && j < n; ++j)
            fill(dt, all.data() + static_cast<size_t>(j) * b, root, j, count);
          std::fill(mine.begin(), mine.end(), 0xEE);
          const std::string s = name("scatter", dt, count, n) + " root " + std::to_string(root);
          ASSERT_TRUE(
              c.scatter(r == root ? all.data() : nullptr, mine.data(), count, dt, root).ok())
              << s;
          check(dt, mine.data(), root, r, count, s);
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, A2aRanks, ::testing::Range(1, 7));

// In place, as MPI_IN_PLACE: the root's own block already in its place (tree and direct).
TEST(A2a, GatherScatterInPlace) {
  run_ranks(5, a2a_options(), [](int r, std::unique_ptr<Rank>& rk) {
    const DataType dt = DataType::kInt32;
    for (size_t count : {size_t{5}, size_t{3000}}) {
      const size_t b = count * 4;
      for (int root = 0; root < 5; ++root) {
        std::vector<uint8_t> mine(b), all(b * 5, 0xEE);
        uint8_t* own = all.data() + static_cast<size_t>(root) * b;
        fill(dt, r == root ? own : mine.data(), r, root, count);
        const void* send = r == root ? own : mine.data();
        ASSERT_TRUE(rk->comm->gather(send, all.data(), count, dt, root).ok());
        for (int i = 0; r == root && i < 5; ++i)
          check(dt, all.data() + static_cast<size_t>(i) * b, i, root, count, "gather in place");
        for (int j = 0; r == root && j < 5; ++j)
          fill(dt, all.data() + static_cast<size_t>(j) * b, root, j, count);
        void* recv = r == root ? own : mine.data();
        ASSERT_TRUE(rk->comm->scatter(all.data(), recv, count, dt, root).ok());
        check(dt, static_cast<uint8_t*>(recv), root, r, count, "scatter in place");
      }
    }
  });
}

// Several calls in flight, waited on in reverse order; Bruck and pairwise among them.
TEST(A2a, AsyncOverlapAnyWaitOrder) {
  run_ranks(4, a2a_options(), [](int r, std::unique_ptr<Rank>& rk) {
    Communicator& c = *rk->comm;
    const size_t counts[] = {2, 3000, 7, 1500};
    std::vector<std::vector<uint8_t>> send, recv;
    std::vector<CollHandle> h;
    for (size_t count : counts) {
      send.emplace_back(count * 4 * 4);
      recv.emplace_back(count * 4 * 4);
      for (int j = 0; j < 4; ++j)
        fill(DataType::kFloat32, send.back().data() + j * count * 4, r, j, count);
      auto s = c.alltoall_async(send.back().data(), recv.back().data(), count, DataType::kFloat32);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      h.push_back(*s);
    }
    for (size_t k = h.size(); k-- > 0;) {
      ASSERT_TRUE(c.wait(h[k], Millis(20000)).ok());
      for (int i = 0; i < 4; ++i)
        check(DataType::kFloat32, recv[k].data() + i * counts[k] * 4, i, r, counts[k], "async");
    }
  });
}

// A rank with another count fails every rank with InvalidArgument, Bruck or pairwise alike.
TEST(A2a, MismatchedCountFailsEveryRank) {
  for (size_t base : {size_t{4}, size_t{4000}}) {
    // Buffers outlive the Groups: a failed call's receives may still land (gw_coll.h).
    std::vector<std::vector<float>> sends(3), recvs(3);
    run_ranks(3, a2a_options(), [&](int r, std::unique_ptr<Rank>& rk) {
      const size_t count = base + (r == 1 ? 1 : 0);
      auto& send = sends[static_cast<size_t>(r)];
      auto& recv = recvs[static_cast<size_t>(r)];
      send.resize(count * 3);
      recv.resize(count * 3);
      Status st = rk->comm->alltoall(send.data(), recv.data(), count, DataType::kFloat32);
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << "rank " << r << ": " << st.to_string();
    });
  }
}

// alltoallv: rank 0 sends rank 1 fewer elements than rank 1 expects. Rank 1 fails; a rank
// that had all its parts may finish first, but its next call fails (the notice).
TEST(A2a, AlltoallvShortPartFails) {
  // Buffers outlive the Groups: a failed call's receives may still land (gw_coll.h).
  std::vector<std::vector<int32_t>> sends(3, std::vector<int32_t>(12)), recvs = sends;
  run_ranks(3, a2a_options(), [&](int r, std::unique_ptr<Rank>& rk) {
    std::vector<size_t> sc(3, 4), rc(3, 4), d = {0, 4, 8};
    if (r == 0) sc[1] = 3;
    auto& send = sends[static_cast<size_t>(r)];
    auto& recv = recvs[static_cast<size_t>(r)];
    Status st = rk->comm->alltoallv(send.data(), sc.data(), d.data(), recv.data(), rc.data(),
                                    d.data(), DataType::kInt32);
    if (r == 1) {
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.to_string();
    }
    if (st.ok()) st = rk->comm->barrier();
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << "rank " << r << ": " << st.to_string();
  });
}

// A rank that never calls: the others time out naming it, Bruck, pairwise and scatter alike
// (a gather's senders may finish: their parts are sent, not waited for).
TEST(A2a, RankThatNeverCallsGivesTimeout) {
  for (size_t count : {size_t{2}, size_t{3000}, size_t{0}}) {
    std::atomic<int> done{0};
    std::vector<Status> st(3);
    CommOptions o = a2a_options();
    o.timeout = Millis(300);
    std::vector<std::vector<float>> sends(3, std::vector<float>(3 * 3000)), recvs = sends;
    run_ranks(3, o, [&](int r, std::unique_ptr<Rank>& rk) {
      if (r == 2) {
        while (done < 2) std::this_thread::sleep_for(Millis(5));
        return;
      }
      auto& send = sends[static_cast<size_t>(r)];
      auto& recv = recvs[static_cast<size_t>(r)];
      st[static_cast<size_t>(r)] =
          count ? rk->comm->alltoall(send.data(), recv.data(), count, DataType::kFloat32)
                : rk->comm->scatter(nullptr, recv.data(), 5, DataType::kFloat32, 2);
      ++done;
    });
    for (int r = 0; r < 2; ++r) {
      const Status& s = st[static_cast<size_t>(r)];
      EXPECT_EQ(s.code(), Code::kTimeout) << count << ", rank " << r << ": " << s.to_string();
      EXPECT_EQ(s.rank(), 2) << s.to_string();
    }
  }
}

// abort() on one rank ends every rank's alltoall with Aborted naming it.
TEST(A2a, AbortReachesEveryRank) {
  std::vector<Status> st(3);
  std::vector<std::vector<int64_t>> sends(3, std::vector<int64_t>(3 * 500)), recvs = sends;
  run_ranks(3, a2a_options(), [&](int r, std::unique_ptr<Rank>& rk) {
    if (r == 1) rk->comm->abort("test");
    auto& send = sends[static_cast<size_t>(r)];
    auto& recv = recvs[static_cast<size_t>(r)];
    st[static_cast<size_t>(r)] =
        rk->comm->alltoall(send.data(), recv.data(), 500, DataType::kInt64);
  });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), Code::kAborted) << s.to_string();
    EXPECT_EQ(s.rank(), 1) << s.to_string();
  }
}

TEST(A2a, BadArguments) {
  run_ranks(2, a2a_options(), [](int r, std::unique_ptr<Rank>& rk) {
    Communicator& c = *rk->comm;
    std::vector<float> buf(8);
    EXPECT_EQ(c.alltoall(buf.data(), buf.data() + 1, 2, DataType::kFloat32).code(),
              Code::kInvalidArgument);  // overlap
    EXPECT_EQ(c.gather(buf.data(), buf.data(), 1, DataType::kFloat32, 2).code(),
              Code::kInvalidArgument);  // root
    EXPECT_EQ(c.scatter(nullptr, buf.data(), 1, DataType::kFloat32, r).code(),
              Code::kInvalidArgument);  // the root's send
    EXPECT_EQ(
        c.alltoallv(buf.data(), nullptr, nullptr, buf.data(), nullptr, nullptr, DataType::kFloat32)
            .code(),
        Code::kInvalidArgument);
    std::vector<size_t> sc = {1, 1}, rc = {1, 1}, d = {0, 1};
    sc[static_cast<size_t>(r)] = 2;  // sends itself 2, receives 1
    EXPECT_EQ(c.alltoallv(buf.data(), sc.data(), d.data(), buf.data() + 4, rc.data(), d.data(),
                          DataType::kFloat32)
                  .code(),
              Code::kInvalidArgument);
    EXPECT_TRUE(c.barrier().ok());  // nothing was started: the ranks still agree
  });
}

}  // namespace
}  // namespace gw::coll_test
