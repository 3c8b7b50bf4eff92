// Conformance harness: transport table, pattern, ranks as threads, exchange engine.
#include "conformance.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "gw_auth.h"

namespace gw::conformance {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// wr_ids carry a marker so that a completion with a made-up wr_id is caught.
constexpr uint64_t kWrMark = uint64_t{0xC0FFEE} << 40;
constexpr uint64_t kWrMask = (uint64_t{1} << 40) - 1;

}  // namespace

// tcp_links2_cuts: a sanitizer build runs ~5x slower, so the same work sees ~5x the faults.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GW_CONFORMANCE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GW_CONFORMANCE_SANITIZED 1
#endif
#endif
#ifdef GW_CONFORMANCE_SANITIZED
#define kFaultMs "200"
#else
#define kFaultMs "20"
#endif

// The one table. A new transport adds rows here and its driver name to the meson.build list
// (which gives it a suite of its own); every test then runs on it.
const std::vector<TransportCase>& all_cases() {
  static const std::vector<TransportCase> cases = {
      {"tcp", "tcp", "tcp:iface=lo"},
      {"tcp_streams4", "tcp", "tcp:iface=lo,streams=4"},
      {"tcp_inet6", "tcp", "tcp:family=inet6,iface=lo"},
      {"tcp_tls", "tcp", "tcp:iface=lo,tls=on", "conformance key"},
      {"tcp_tls_streams4", "tcp", "tcp:iface=lo,streams=4,tls=on", "conformance key"},
      // Several links (tcp.ifaces): both on lo, so acknowledgement-driven completion and
      // striping by delivery run here; cutting a link needs the namespace bed (cluster-tcp-links).
      {"tcp_links2", "tcp", "tcp:ifaces=lo,lo,link_chunk_bytes=65536"},
      // ... and a stream given up every 20 ms mid-transfer: sent again, joined again.
      {"tcp_links2_cuts", "tcp", "tcp:ifaces=lo,lo,link_chunk_bytes=65536,link_fault_ms=" kFaultMs},
      // rxe0 exists only inside the soft-RoCE VM (tests/rdma/run_in_vm.sh runs these rows).
      {"rxe", "rdma", "rdma:dev=rxe0"},
      {"rxe_qps2", "rdma", "rdma:dev=rxe0,qps_per_conn=2"},
  };
  return cases;
}

std::vector<TransportCase> built_cases(std::string_view driver) {
  auto built = Transport::drivers();
  // Each meson suite runs the rows of its own driver (GW_CONFORMANCE_DRIVER=tcp).
  const char* env = std::getenv("GW_CONFORMANCE_DRIVER");
  std::string_view only = env ? env : "";
  std::vector<TransportCase> out;
  for (const auto& c : all_cases()) {
    bool is_built = std::find(built.begin(), built.end(), c.driver) != built.end();
    if (is_built && (driver.empty() || driver == c.driver) && (only.empty() || only == c.driver))
      out.push_back(c);
  }
  return out;
}

std::vector<TransportCase> plain_cases(std::string_view driver) {
  auto out = built_cases(driver);
  // A raw peer speaks the plain single-link wire: no TLS, no tcp.ifaces.
  std::erase_if(out, [](const TransportCase& c) {
    return c.key != nullptr || std::string_view(c.spec).find("ifaces=") != std::string_view::npos;
  });
  return out;
}

std::ostream& operator<<(std::ostream& os, const TransportCase& c) { return os << c.spec; }

Result<std::unique_ptr<Transport>> open_case(const TransportCase& c) {
  const std::string spec =
      expand_spec(c.spec, std::max(0, child_rank()), std::to_string(::getpid()) + "_open");
  if (!c.key) return Transport::open(spec);
  // The process key, set without the environment (other ranks' threads read it meanwhile);
  // ranks of a keyed row take turns.
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  auth::set_key_for_test(c.key);
  auto t = Transport::open(spec);
  auth::reload_key_for_test();
  return t;
}

void skip_unless_available(const TransportCase& c) {
  if (is_process_row(c)) return;  // each rank's process opens its own; its failure fails the test
  auto t = open_case(c);
  if (t.ok()) return;
  if (t.status().code() == Code::kUnavailable) {
    GTEST_SKIP() << "transport '" << c.spec
                 << "' cannot be opened on this machine: " << t.status().to_string();
  }
  FAIL() << "Transport::open(\"" << c.spec << "\"): " << t.status().to_string();
}

void TransportTest::SetUp() { skip_unless_available(tc()); }
void RanksTest::SetUp() { skip_unless_available(tc()); }

std::string case_name(const ::testing::TestParamInfo<TransportCase>& info) {
  return info.param.name;
}

std::string ranks_name(const ::testing::TestParamInfo<std::tuple<TransportCase, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_" + std::to_string(std::get<1>(info.param)) +
         "ranks";
}

uint64_t msg_seed(int src, int dst, uint64_t tag, uint64_t seq) {
  uint64_t s = splitmix((static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst));
  return splitmix(splitmix(s ^ tag) + seq);
}

void fill_pattern(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = 0, k = 0; i < n; i += 8, ++k) {
    uint64_t w = splitmix(seed + k);
    std::memcpy(p + i, &w, std::min<size_t>(8, n - i));
  }
}

std::string check_pattern(const uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = 0, k = 0; i < n; i += 8, ++k) {
    uint64_t w = splitmix(seed + k);
    size_t m = std::min<size_t>(8, n - i);
    if (std::memcmp(p + i, &w, m) == 0) continue;
    auto* e = reinterpret_cast<const uint8_t*>(&w);
    for (size_t j = 0; j < m; ++j) {
      if (p[i + j] != e[j]) {
        std::ostringstream os;
        os << "byte " << i + j << " of " << n << " is 0x" << std::hex << int{p[i + j]}
           << ", expected 0x" << int{e[j]};
        return os.str();
      }
    }
  }
  return "";
}

namespace {

// Opens the transport of rank r and joins the group; null (with a failure) on error.
std::unique_ptr<Group> join(const TransportCase& c, const std::shared_ptr<Store>& store, int r,
                            int ranks) {
  auto t = open_case(c);
  if (!t.ok()) {
    ADD_FAILURE() << "rank " << r << ": open " << c.spec << ": " << t.status().to_string();
    return nullptr;
  }
  auto g = Group::create(store, std::move(t).value(), r, ranks, kStepTimeout);
  if (!g.ok()) {
    ADD_FAILURE() << "rank " << r << " of " << ranks
                  << ": Group::create: " << g.status().to_string();
    return nullptr;
  }
  return std::move(g).value();
}

}  // namespace

void run_ranks(const TransportCase& c, int ranks, const std::function<void(Group&)>& body) {
  if (is_process_row(c)) return run_rank_procs(c, ranks, body);
  auto store = make_in_process_store();
  // Ranks stay connected until all are done, so a slow rank does not see its peers leave; a
  // rank that is done keeps polling meanwhile, because a polling transport (DPDK) acknowledges
  // and retransmits only while polled. After a failure a rank leaves at once, so the others
  // fail fast instead of timing out.
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto g = join(c, store, r, ranks);
      if (g) body(*g);
      ++arrived;
      if (!g || ::testing::Test::HasFailure()) return;
      Deadline dl(kStepTimeout);
      while (arrived.load() < ranks && !dl.expired()) {
        (void)g->transport().cq().poll({});
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<std::unique_ptr<Group>> make_groups(const TransportCase& c, int ranks) {
  auto store = make_in_process_store();
  std::vector<std::unique_ptr<Group>> groups(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { groups[static_cast<size_t>(r)] = join(c, store, r, ranks); });
  }
  for (auto& t : threads) t.join();
  for (auto& g : groups) {
    if (!g) return {};
  }
  return groups;
}

Req& Exchange::add(bool is_send, int peer, uint64_t tag, size_t len) {
  Req& r = reqs_.emplace_back();
  r.is_send = is_send;
  r.peer = peer;
  r.tag = tag;
  r.len = len;
  r.buf.assign(is_send ? len : len + kGuard, kGuardByte);
  if (!r.buf.empty()) {
    auto mr = g_.transport().register_memory(r.buf.data(), r.buf.size(), MemKind::kHost);
    if (mr.ok()) {
      r.mr = std::move(mr).value();
    } else {
      ADD_FAILURE() << "register_memory(" << r.buf.size() << " B): " << mr.status().to_string();
    }
  }
  return r;
}

size_t Exchange::send(int peer, uint64_t tag, size_t len, uint64_t seq) {
  Req& r = add(true, peer, tag, len);
  fill_pattern(r.buf.data(), len, msg_seed(g_.rank(), peer, tag, seq));
  return reqs_.size() - 1;
}

size_t Exchange::recv(int peer, uint64_t tag, size_t cap, uint64_t exp_seq, size_t exp_len,
                      Code exp_code) {
  Req& r = add(false, peer, tag, cap);
  r.check = true;
  r.exp_src = peer;
  r.exp_tag = tag;
  r.exp_seq = exp_seq;
  r.exp_len = exp_len;
  r.exp_code = exp_code;
  return reqs_.size() - 1;
}

size_t Exchange::recv_any(uint64_t tag, size_t cap) {
  Req& r = add(false, -1, tag, cap);
  r.any_source = true;
  return reqs_.size() - 1;
}

// Posts, per endpoint and for any-source, everything not yet taken, receives first.
Status Exchange::post_pending(bool& posted_any) {
  const int n = g_.size();
  std::vector<std::vector<size_t>> recvs(n), sends(n);
  std::vector<size_t> anys;
  for (size_t i = 0; i < reqs_.size(); ++i) {
    const Req& r = reqs_[i];
    if (r.c.wr_id != 0) continue;  // already posted
    if (r.any_source) {
      anys.push_back(i);
    } else {
      (r.is_send ? sends : recvs)[r.peer].push_back(i);
    }
  }
  auto mark = [&](const std::vector<size_t>& idx, size_t taken) {
    for (size_t k = 0; k < taken; ++k) reqs_[idx[k]].c.wr_id = kWrMark | idx[k];
    posted_any |= taken > 0;
  };
  auto recv_reqs = [&](const std::vector<size_t>& idx) {
    std::vector<RecvRequest> v;
    for (size_t i : idx) {
      Req& r = reqs_[i];
      v.push_back({r.buf.data(), r.len, r.tag, kWrMark | i, r.buf.empty() ? nullptr : &r.mr});
    }
    return v;
  };
  for (int p = 0; p < n; ++p) {
    if (recvs[p].empty()) continue;
    auto v = recv_reqs(recvs[p]);
    auto taken = g_.endpoint(p).post_recv(v);
    if (!taken.ok()) return taken.status().with_context("post_recv to rank " + std::to_string(p));
    mark(recvs[p], *taken);
  }
  if (!anys.empty()) {
    auto v = recv_reqs(anys);
    auto taken = g_.transport().post_recv_any(v);
    if (!taken.ok()) return taken.status().with_context("post_recv_any");
    mark(anys, *taken);
  }
  for (int p = 0; p < n; ++p) {
    if (sends[p].empty()) continue;
    std::vector<SendRequest> v;
    for (size_t i : sends[p]) {
      Req& r = reqs_[i];
      v.push_back({r.buf.data(), r.len, r.tag, kWrMark | i, r.buf.empty() ? nullptr : &r.mr});
    }
    auto taken = g_.endpoint(p).post_send(v);
    if (!taken.ok()) return taken.status().with_context("post_send to rank " + std::to_string(p));
    mark(sends[p], *taken);
  }
  return Status();
}

Status Exchange::run(Nanos timeout) {
  Deadline dl(timeout);
  size_t done = 0;
  for (const Req& r : reqs_) done += r.done;
  std::array<Completion, 64> out;
  while (done < reqs_.size()) {
    bool posted_any = false;
    GW_RETURN_IF_ERROR(post_pending(posted_any));
    bool all_posted =
        std::all_of(reqs_.begin(), reqs_.end(), [](const Req& r) { return r.c.wr_id != 0; });
    Result<size_t> n = size_t{0};
    if (posted_any && !all_posted) {
      n = g_.transport().cq().poll(out);
    } else {
      n = g_.transport().cq().wait(out, std::min<Nanos>(dl.remaining(), Millis(50)));
    }
    if (!n.ok() && n.status().code() != Code::kTimeout) return n.status();
    for (size_t i = 0; i < (n.ok() ? *n : 0); ++i) {
      const Completion& c = out[i];
      if (c.op == Op::kEndpointError) {
        ep_errors_.push_back(c);
        continue;
      }
      uint64_t idx = c.wr_id & kWrMask;
      if ((c.wr_id & ~kWrMask) != kWrMark || idx >= reqs_.size()) {
        ADD_FAILURE() << "rank " << g_.rank() << ": completion with unknown wr_id 0x" << std::hex
                      << c.wr_id;
        continue;
      }
      Req& r = reqs_[idx];
      if (r.done) {
        ADD_FAILURE() << "rank " << g_.rank() << ": request " << idx << " completed twice";
        continue;
      }
      EXPECT_EQ(c.op, r.is_send ? Op::kSend : Op::kRecv) << "rank " << g_.rank() << " req " << idx;
      r.done = true;
      r.c = c;
      ++done;
    }
    if (done < reqs_.size() && dl.expired()) {
      std::ostringstream os;
      os << "rank " << g_.rank() << ": " << reqs_.size() - done << " of " << reqs_.size()
         << " requests still pending after " << timeout.count() / 1'000'000 << " ms; first:";
      int shown = 0;
      for (const Req& r : reqs_) {
        if (r.done || shown++ == 3) continue;
        os << " [" << (r.is_send ? "send to " : "recv from ") << r.peer << " tag " << r.tag
           << " len " << r.len << (r.c.wr_id ? "" : " (never taken by post)") << "]";
      }
      return Status(Code::kTimeout, os.str());
    }
  }
  return Status();
}

void Exchange::verify_recv(const Req& r, int src, int dst, uint64_t tag, uint64_t seq, size_t len) {
  const Completion& c = r.c;
  EXPECT_EQ(c.code, Code::kOk) << "recv at rank " << dst << " from " << src << " tag " << tag
                               << " seq " << seq;
  EXPECT_EQ(c.op, Op::kRecv);
  EXPECT_EQ(c.tag, tag) << "recv at rank " << dst << " from " << src << " seq " << seq;
  EXPECT_EQ(c.peer_id, static_cast<uint32_t>(src)) << "recv at rank " << dst << " tag " << tag;
  ASSERT_EQ(c.len, len) << "recv at rank " << dst << " from " << src << " tag " << tag << " seq "
                        << seq;
  ASSERT_GE(r.buf.size(), len + kGuard);
  std::string bad = check_pattern(r.buf.data(), len, msg_seed(src, dst, tag, seq));
  EXPECT_EQ(bad, "") << "recv at rank " << dst << " from " << src << " tag " << tag << " seq "
                     << seq << " len " << len;
  auto it = std::find_if(r.buf.begin() + static_cast<ptrdiff_t>(len), r.buf.end(),
                         [](uint8_t b) { return b != kGuardByte; });
  EXPECT_TRUE(it == r.buf.end()) << "recv at rank " << dst << " from " << src << " wrote byte "
                                 << (it - r.buf.begin()) << " beyond the message (len " << len
                                 << ", capacity " << r.len << ")";
}

void Exchange::verify() const {
  int failures = 0;
  for (size_t i = 0; i < reqs_.size() && failures < 10; ++i) {
    const Req& r = reqs_[i];
    bool before = ::testing::Test::HasFailure();
    EXPECT_TRUE(r.done) << "rank " << g_.rank() << " request " << i << " never completed";
    if (!r.done) {
      ++failures;
      continue;
    }
    if (!r.any_source) {
      EXPECT_EQ(r.c.peer_id, static_cast<uint32_t>(r.peer)) << "rank " << g_.rank() << " req " << i;
      EXPECT_EQ(r.c.ep, &g_.endpoint(r.peer)) << "rank " << g_.rank() << " req " << i;
    }
    if (r.is_send) {
      EXPECT_EQ(r.c.code, Code::kOk) << "rank " << g_.rank() << " send " << i << " to " << r.peer;
      EXPECT_EQ(r.c.len, r.len) << "rank " << g_.rank() << " send " << i << " to " << r.peer;
    } else if (r.check && r.exp_code == Code::kOk) {
      verify_recv(r, r.exp_src, g_.rank(), r.exp_tag, r.exp_seq, r.exp_len);
    } else if (r.check) {
      EXPECT_EQ(r.c.code, r.exp_code) << "rank " << g_.rank() << " recv " << i << " from " << r.peer
                                      << " (capacity " << r.len << ")";
      EXPECT_EQ(r.c.len, r.exp_len) << "failed recv reports the message length";
      bool guard_ok = std::all_of(r.buf.begin() + static_cast<ptrdiff_t>(r.len), r.buf.end(),
                                  [](uint8_t b) { return b == kGuardByte; });
      EXPECT_TRUE(guard_ok) << "recv " << i << " wrote beyond its capacity " << r.len;
    }
    failures += !before && ::testing::Test::HasFailure();
  }
}

// Ranks meet at a named point through the group's store.
void signal(Group& g, const std::string& name) { ASSERT_TRUE(g.store().set(name, "1").ok()); }
// A polling transport (DPDK) acknowledges only while someone polls it, so the wait keeps the
// transport moving (an empty span takes no completions).
void await(Group& g, const std::string& name) {
  Deadline dl(kStepTimeout);
  Result<std::string> v = Status(Code::kTimeout, "not yet");
  while (!dl.expired()) {
    v = g.store().get(name, Millis(1));
    if (v.ok() || v.status().code() != Code::kTimeout) break;
    (void)g.transport().cq().poll({});
  }
  ASSERT_TRUE(v.ok()) << "rank " << g.rank() << ": " << v.status().to_string();
}

}  // namespace gw::conformance
