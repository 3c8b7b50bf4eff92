/// @file conformance.h
/// Shared parts of the transport conformance suite: the table of transports under test, the
/// byte pattern every message carries, ranks-as-threads over an in-process store, and an
/// exchange engine that posts bursts (taking what the endpoint accepts), polls and checks.
/// Thread-safety: an Exchange belongs to one rank thread; everything else is stateless.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gw_group.h"
#include "gw_store.h"
#include "gw_transport.h"
#include "log.h"

namespace gw::conformance {

/// One row of the table: a transport spec as Transport::open takes it.
struct TransportCase {
  const char* name;    ///< used in test names: letters, digits, '_'
  const char* driver;  ///< row runs only when Transport::drivers() lists it
  const char* spec;
  const char* key = nullptr;  ///< GW_AUTH_KEY its transports open with (tcp.tls needs one)
};

/// Every transport the suite knows, built or not. DPDK and RDMA rows are added here.
const std::vector<TransportCase>& all_cases();
/// Rows whose driver is built into this library (optionally only those of `driver`).
std::vector<TransportCase> built_cases(std::string_view driver = {});
/// The built rows a raw peer can talk to: no key (TLS rows need one), one link (no tcp.ifaces).
std::vector<TransportCase> plain_cases(std::string_view driver = {});

std::ostream& operator<<(std::ostream& os, const TransportCase& c);

/// Deadline for any one step of a test (group creation, one exchange).
inline constexpr Nanos kStepTimeout = std::chrono::seconds(30);

/// Process rows (rank_procs.cc): a spec with "{rank}" or "{role}" runs each rank in a process
/// of its own (the test binary re-run for the current test), since some drivers own their
/// device once per process (DPDK's EAL). Expanded per rank: "{rank}", "{role}" (server for
/// rank 0, client otherwise), "{run}" (one id per group, e.g. for a memif socket path).
bool is_process_row(const TransportCase& c);
std::string expand_spec(const std::string& spec, int rank, const std::string& run);
/// In a rank's process: its rank (GW_CONF_RANK); -1 in the test binary's own process.
int child_rank();
/// Runs rank r's process under `ip netns exec ns[r]` (empty: none), e.g. af_packet on veths.
void set_rank_netns(std::vector<std::string> ns);
/// run_ranks for process rows: spawns, waits (bounded) and checks every rank's verdict.
void run_rank_procs(const TransportCase& c, int ranks, const std::function<void(Group&)>& body);

/// Opens the transport or returns why not; Unavailable means "this machine has no such device".
Result<std::unique_ptr<Transport>> open_case(const TransportCase& c);

/// Seed of the message `seq` with `tag` from rank `src` to rank `dst`.
uint64_t msg_seed(int src, int dst, uint64_t tag, uint64_t seq);
/// Writes the pattern of `seed` (independent of the transport: splitmix64 per 8-byte word).
void fill_pattern(uint8_t* p, size_t n, uint64_t seed);
/// "" if p[0..n) holds the pattern of `seed`, else where and what the first difference is.
std::string check_pattern(const uint8_t* p, size_t n, uint64_t seed);

/// Runs body(group) on `ranks` threads; each opens its own Transport from `c.spec` and joins a
/// Group over one in-process store. gtest assertions inside body are thread-safe; a fatal one
/// ends only that rank, whose peers then see it leave.
void run_ranks(const TransportCase& c, int ranks, const std::function<void(Group&)>& body);

/// Forms a group of `ranks` (threads only while connecting) and returns every rank's Group,
/// for tests that drive several ranks from one thread. Empty (with a failure) on error.
std::vector<std::unique_ptr<Group>> make_groups(const TransportCase& c, int ranks);

/// Rank 1 sends messages of 0 B .. 3 MiB to rank 0 and leaves (its transport destroyed) once
/// they are sent; rank 0 sees the endpoint error, then posts the receives and must get every
/// byte; one receive more fails naming the close. Asserts with gtest.
void close_then_receive(const TransportCase& tc);

/// One posted request and what became of it.
struct Req {
  bool is_send = false;
  bool any_source = false;
  int peer = -1;  ///< -1 for any-source receives
  uint64_t tag = 0;
  size_t len = 0;            ///< send length, or receive capacity
  std::vector<uint8_t> buf;  ///< receives: capacity + guard bytes
  MemoryRegion mr;
  bool done = false;
  Completion c;
  // What a receive expects (checked by Exchange::verify).
  bool check = false;
  int exp_src = -1;
  uint64_t exp_tag = 0, exp_seq = 0;
  size_t exp_len = 0;
  Code exp_code = Code::kOk;
};

/// Bytes after a receive's capacity that must never be written.
/// How many requests a post_* call took (0 on error: the test's own check then fails).
inline size_t taken(const Result<size_t>& r) { return r.ok() ? *r : 0; }

inline constexpr size_t kGuard = 64;
inline constexpr uint8_t kGuardByte = 0xA5;

/// Builds a set of sends and receives for one rank, posts them all (bursts; when an endpoint
/// takes fewer, it polls and posts the rest), waits until every request completed, verifies.
class Exchange {
 public:
  explicit Exchange(Group& g) : g_(g) {}
  /// Send `len` bytes of the pattern msg_seed(rank, peer, tag, seq). @return index.
  size_t send(int peer, uint64_t tag, size_t len, uint64_t seq);
  /// Receive into `cap` bytes from `peer`, expecting message `seq` of `len` bytes from it.
  size_t recv(int peer, uint64_t tag, size_t cap, uint64_t exp_seq, size_t exp_len,
              Code exp_code = Code::kOk);
  /// Any-source receive; the test checks the outcome itself.
  size_t recv_any(uint64_t tag, size_t cap);
  /// Post what the endpoints take now, without waiting. @return the first post error.
  Status post() {
    bool any = false;
    return post_pending(any);
  }
  /// Post everything and wait for every completion before `timeout`.
  /// @return the first post error or a Timeout listing what is still pending.
  Status run(Nanos timeout = kStepTimeout);
  /// Check every receive marked with expectations (code, length, tag, peer, bytes, guard).
  void verify() const;
  /// Check one receive against the message `seq` of `len` bytes from `src` with `tag`.
  static void verify_recv(const Req& r, int src, int dst, uint64_t tag, uint64_t seq, size_t len);

  std::vector<Req>& reqs() { return reqs_; }
  /// Op::kEndpointError completions seen.
  const std::vector<Completion>& endpoint_errors() const { return ep_errors_; }

 private:
  Req& add(bool is_send, int peer, uint64_t tag, size_t len);
  Status post_pending(bool& posted_any);

  Group& g_;
  std::vector<Req> reqs_;
  std::vector<Completion> ep_errors_;
};

/// Fixture over the table.
class TransportTest : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override;
  const TransportCase& tc() const { return GetParam(); }
};

/// Fixture over the table × rank counts.
class RanksTest : public ::testing::TestWithParam<std::tuple<TransportCase, int>> {
 protected:
  void SetUp() override;
  const TransportCase& tc() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

/// Test-name generators for INSTANTIATE_TEST_SUITE_P.
std::string case_name(const ::testing::TestParamInfo<TransportCase>& info);
std::string ranks_name(const ::testing::TestParamInfo<std::tuple<TransportCase, int>>& info);

/// Skips (with the reason) if the row's device is not on this machine; fails on other errors.
void skip_unless_available(const TransportCase& c);

/// Ranks meet at a named point through the group's store. await() keeps the transport
/// progressing meanwhile: a polling transport acknowledges only while someone polls it.
void signal(Group& g, const std::string& name);
void await(Group& g, const std::string& name);

// Counts the driver's warnings while alive.
class WarnCounter {
 public:
  explicit WarnCounter(const std::string& driver)
      : log_(log::get(("gw.drv." + driver).c_str())),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)),
        level_(log_->level()) {
    sink_->set_level(spdlog::level::warn);
    log_->sinks().push_back(sink_);
    log_->set_level(spdlog::level::debug);
  }
  ~WarnCounter() {
    log_->sinks().pop_back();
    log_->set_level(level_);
  }
  std::vector<std::string> warnings() { return sink_->last_formatted(); }

 private:
  std::shared_ptr<spdlog::logger> log_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace gw::conformance
