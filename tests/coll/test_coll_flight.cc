// Flight recorder (lib/coll/flight_recorder.h) and gw-doctor (apps/gw-doctor): the ring keeps
// the last N calls as they were made on every rank, a failure dumps them, and gw-doctor reads
// the dumps of a mismatch and of a hang and names the rank at fault. GW_DOCTOR: the app's path.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <barrier>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "coll_harness.h"
#include "flight_recorder.h"
#include "health_server.h"

namespace gw::coll_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string temp_dir() {
  std::string t = (fs::temp_directory_path() / "gw-flight-test-XXXXXX").string();
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

CommOptions flight_opts(const std::string& dir, int64_t records = -1) {
  CommOptions o = small_chunks();
  o.flight_records = records;
  o.flight_dir = dir;
  return o;
}

json read_dump(const std::string& dir, int rank) {
  std::ifstream in(dir + "/gw-flight-" + std::to_string(rank) + ".json");
  EXPECT_TRUE(in.good()) << "no dump of rank " << rank << " in " << dir;
  return in ? json::parse(in, nullptr, false) : json();
}

struct Doctor {
  int rc = -1;
  std::string out;
};

// Runs gw-doctor on `dir`; skips the test when GW_DOCTOR is not set (meson sets it).
Doctor doctor(const std::string& args) {
  const char* exe = std::getenv("GW_DOCTOR");
  Doctor d;
  if (!exe || !*exe) return d;
  FILE* p = popen((std::string(exe) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return d;
  char buf[4096];
  for (size_t k; (k = std::fread(buf, 1, sizeof(buf), p)) > 0;) d.out.append(buf, k);
  const int st = pclose(p);
  d.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return d;
}

#define NEED_DOCTOR() \
  if (!std::getenv("GW_DOCTOR")) GTEST_SKIP() << "GW_DOCTOR (gw-doctor's path) not set"

// A reader racing the writer copies whole records: count and bytes always belong together.
TEST(FlightRecorder, ReaderNeverSeesATornRecord) {
  coll::FlightRecorder fr(8);
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      for (const coll::FlightEntry& e : fr.snapshot()) {
        ASSERT_EQ(e.bytes, e.count * 4) << "torn record " << e.id;
        ASSERT_EQ(e.seq, e.count) << "torn record " << e.id;
      }
    }
  });
  for (uint32_t i = 1; i <= 200000; ++i) {
    coll::FlightEntry e;
    e.seq = i;
    e.count = i;
    e.bytes = uint64_t{i} * 4;
    const uint64_t id = fr.begin(e);
    fr.end(id, coll::FlightState::kOk, 0, 0, 1);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(fr.recorded(), 200000u);
  auto all = fr.snapshot();
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(all.front().seq, 200000u - 7);
  EXPECT_EQ(all.back().state, static_cast<uint8_t>(coll::FlightState::kOk));
}

// A shrink's successor takes the ring over: the old calls leave the snapshots, ids go on.
TEST(FlightRecorder, RestartShowsOnlyTheNewCalls) {
  coll::FlightRecorder fr(4);
  coll::FlightEntry e;
  for (uint32_t i = 1; i <= 3; ++i) fr.end(fr.begin(e), coll::FlightState::kOk, 0, 0, 1);
  fr.restart();
  EXPECT_EQ(fr.recorded(), 0u);
  EXPECT_TRUE(fr.snapshot().empty());
  e.seq = 9;
  const uint64_t id = fr.begin(e);
  EXPECT_EQ(id, 4u);
  auto all = fr.snapshot();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].seq, 9u);
  EXPECT_EQ(fr.recorded(), 1u);
}

// What one connection to "@name" reads; "" when nobody listens there.
std::string ask(const std::string& name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0) {
    char buf[256];
    for (ssize_t k; (k = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(k));
  }
  close(fd);
  return out;
}

// rebind: the same thread answers for the successor under its name; the old name is gone.
TEST(HealthServer, RebindMovesTheAnswerToTheNewName) {
  const std::string a = "gw-test-health/" + std::to_string(getpid()) + "/a";
  const std::string b = "gw-test-health/" + std::to_string(getpid()) + "/b";
  auto s = coll::HealthServer::start(a, [] { return std::string("first"); });
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(ask(a), "first");
  bool swapped = false;
  ASSERT_TRUE((*s)->rebind(
                      b, [] { return std::string("second"); }, {}, 0, [&] { swapped = true; })
                  .ok());
  EXPECT_TRUE(swapped);
  EXPECT_EQ(ask(b), "second");
  EXPECT_EQ(ask(a), "");
  EXPECT_EQ((*s)->name(), b);
  // A name in use is refused, and the server keeps answering where it was.
  auto other = coll::HealthServer::start(a, [] { return std::string("other"); });
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*s)->rebind(
                       a, [] { return std::string("third"); }, {}, 0)
                   .ok());
  EXPECT_EQ(ask(b), "second");
  EXPECT_EQ(ask(a), "other");
}

TEST(CollFlight, RingWrapsAndKeepsTheLastN) {
  run_ranks(2, flight_opts("", 5), [&](int, std::unique_ptr<Rank>& rk) {
    std::vector<float> v(64, 1.f);
    for (size_t i = 1; i <= 12; ++i)
      ASSERT_TRUE(
          rk->comm->allreduce(v.data(), v.data(), i, DataType::kFloat32, ReduceOp::kSum).ok());
    auto rec = rk->comm->flight_records();
    ASSERT_EQ(rec.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(rec[k].seq, 8 + k);
      EXPECT_EQ(rec[k].count, 8 + k);
      EXPECT_STREQ(rec[k].state, "ok");
    }
  });
}

TEST(CollFlight, RecordsMatchTheCallsOnEveryRank) {
  struct Want {
    const char* op;
    DataType dt;
    size_t count;
    int root;
  };
  const std::vector<Want> want = {
      {"allreduce", DataType::kFloat32, 100, 0}, {"broadcast", DataType::kInt32, 10, 2},
      {"allgather", DataType::kFloat64, 7, 0},   {"reduce_scatter", DataType::kInt32, 5, 0},
      {"barrier", DataType::kUInt8, 1, 0},       {"alltoall", DataType::kUInt8, 4, 0},
      {"gather", DataType::kInt64, 3, 1},        {"scatter", DataType::kFloat32, 2, 2}};
  run_ranks(3, flight_opts(""), [&](int r, std::unique_ptr<Rank>& rk) {
    Communicator& c = *rk->comm;
    std::vector<uint8_t> a(4096), b(4096);
    ASSERT_TRUE(c.allreduce(a.data(), a.data(), 100, DataType::kFloat32, ReduceOp::kSum).ok());
    ASSERT_TRUE(c.broadcast(a.data(), 10, DataType::kInt32, 2).ok());
    ASSERT_TRUE(c.allgather(a.data(), b.data(), 7, DataType::kFloat64).ok());
    ASSERT_TRUE(c.reduce_scatter(a.data(), b.data(), 5, DataType::kInt32, ReduceOp::kMax).ok());
    ASSERT_TRUE(c.barrier().ok());
    ASSERT_TRUE(c.alltoall(a.data(), b.data(), 4, DataType::kUInt8).ok());
    ASSERT_TRUE(c.gather(a.data(), b.data(), 3, DataType::kInt64, 1).ok());
    ASSERT_TRUE(c.scatter(a.data(), b.data(), 2, DataType::kFloat32, 2).ok());
    auto rec = c.flight_records();
    ASSERT_EQ(rec.size(), want.size()) << "rank " << r;
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE("rank " + std::to_string(r) + ", call " + std::to_string(i));
      EXPECT_EQ(rec[i].seq, i + 1);
      EXPECT_STREQ(rec[i].op, want[i].op);
      EXPECT_EQ(rec[i].dt, want[i].dt);
      EXPECT_EQ(rec[i].count, want[i].count);
      EXPECT_EQ(rec[i].root, want[i].root);
      EXPECT_STREQ(rec[i].state, "ok");
    }
  });
}

TEST(CollFlight, OffKeepsNothing) {
  run_ranks(2, flight_opts("", 0), [&](int, std::unique_ptr<Rank>& rk) {
    ASSERT_TRUE(rk->comm->barrier().ok());
    EXPECT_TRUE(rk->comm->flight_records().empty());
    EXPECT_EQ(rk->comm->dump_flight_record().status().code(), Code::kNotSupported);
  });
}

TEST(CollFlight, DeadPeerDumpNamesTheFailedCall) {
  const std::string dir = temp_dir();
  CommOptions o = flight_opts(dir);
  o.timeout = Millis(4000);
  const size_t count = 1 << 20;
  std::vector<std::vector<float>> bufs(3, std::vector<float>(count, 1.f));
  run_ranks(3, o, [&](int r, std::unique_ptr<Rank>& rk) {
    float* v = bufs[static_cast<size_t>(r)].data();
    ASSERT_TRUE(rk->comm->barrier().ok());
    if (r == 2) {
      auto h = rk->comm->allreduce_async(v, v, count, DataType::kFloat32, ReduceOp::kSum);
      ASSERT_TRUE(h.ok());
      for (int i = 0; i < 20; ++i) (void)rk->comm->progress();
      rk.reset();  // dies mid-call: its sockets close
      return;
    }
    EXPECT_FALSE(rk->comm->allreduce(v, v, count, DataType::kFloat32, ReduceOp::kSum).ok());
  });
  for (int r : {0, 1}) {
    json j = read_dump(dir, r);
    ASSERT_TRUE(j.is_object()) << "rank " << r;
    EXPECT_EQ(j["trigger"], "failure") << j.dump();
    EXPECT_FALSE(j["broken"].is_null());
    const json& last = j["ops"].back();
    EXPECT_EQ(last["op"], "allreduce") << j.dump();
    EXPECT_EQ(last["seq"], 2);
    EXPECT_EQ(last["count"], count);
    EXPECT_EQ(last["state"], "failed") << j.dump();
    EXPECT_EQ(j["ops"][0]["state"], "ok");
  }
  fs::remove_all(dir);
}

TEST(CollFlight, SigusrDumpsEveryRank) {
  const std::string dir = temp_dir();
  ASSERT_TRUE(coll::flight_install_signal()) << "another SIGUSR1 handler in the test binary";
  std::barrier sync(2);
  run_ranks(2, flight_opts(dir), [&](int r, std::unique_ptr<Rank>& rk) {
    ASSERT_TRUE(rk->comm->barrier().ok());
    sync.arrive_and_wait();
    if (r == 0) ::raise(SIGUSR1);
    sync.arrive_and_wait();
    ASSERT_TRUE(rk->comm->progress().ok());  // the next call services it
  });
  for (int r : {0, 1}) EXPECT_EQ(read_dump(dir, r)["trigger"], "signal") << "rank " << r;
  fs::remove_all(dir);
}

// Ranks 0 and 2 call allreduce of 1000 elements, rank 1 of 2000: gw-doctor names rank 1.
TEST(CollDoctor, NamesTheMismatchedRank) {
  NEED_DOCTOR();
  const std::string dir = temp_dir();
  std::vector<std::vector<float>> bufs(3, std::vector<float>(2000, 1.f));
  std::barrier sync(3);
  run_ranks(3, flight_opts(dir), [&](int r, std::unique_ptr<Rank>& rk) {
    float* v = bufs[static_cast<size_t>(r)].data();
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(rk->comm->allreduce(v, v, 10, DataType::kFloat32, ReduceOp::kSum).ok());
    // All done with #3 before #4, so no rank's #3 sees the others' #4 fail. A rank broken by
    // then (a peer's notice) is refused at #4, and its record says what it called.
    sync.arrive_and_wait();
    const size_t n = r == 1 ? 2000 : 1000;
    EXPECT_FALSE(rk->comm->allreduce(v, v, n, DataType::kFloat32, ReduceOp::kSum).ok());
  });
  Doctor d = doctor(dir + " --json");
  ASSERT_EQ(d.rc, 1) << d.out;
  json j = json::parse(d.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << d.out;
  ASSERT_EQ(j["mismatches"].size(), 1u) << d.out;
  EXPECT_EQ(j["mismatches"][0]["seq"], 4) << d.out;
  EXPECT_EQ(j["mismatches"][0]["odd_ranks"], json::array({1})) << d.out;
  d = doctor(dir);
  EXPECT_EQ(d.rc, 1);
  EXPECT_NE(d.out.find("MISMATCH at #4"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("count=2000"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("rank 1 called differently"), std::string::npos) << d.out;
  fs::remove_all(dir);
}

// Rank 1 never makes the 3rd call; the others time out in it: gw-doctor names rank 1 as
// behind, and the others as blocked by it (one may wait for the other, which waits for it).
TEST(CollDoctor, NamesTheRankBehind) {
  NEED_DOCTOR();
  const std::string dir = temp_dir();
  CommOptions o = flight_opts(dir);
  o.timeout = Millis(300);
  std::atomic<int> done{0};
  run_ranks(3, o, [&](int r, std::unique_ptr<Rank>& rk) {
    float x = 1;
    for (int i = 0; i < 2; ++i)
      ASSERT_TRUE(rk->comm->allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum).ok());
    if (r == 1) {  // busy elsewhere; dumps on request as a hung job's operator would ask
      while (done.load() < 2) std::this_thread::sleep_for(Millis(5));
      EXPECT_TRUE(rk->comm->dump_flight_record().ok());
      return;
    }
    EXPECT_EQ(rk->comm->allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum).code(),
              Code::kTimeout);
    done.fetch_add(1);
  });
  Doctor d = doctor(dir + " --json");
  ASSERT_EQ(d.rc, 1) << d.out;
  json j = json::parse(d.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << d.out;
  EXPECT_EQ(j["behind"], json::array({1})) << d.out;
  EXPECT_EQ(j["front"], 3) << d.out;
  EXPECT_TRUE(j["mismatches"].empty()) << d.out;
  ASSERT_EQ(j["waiting"].size(), 2u) << d.out;
  for (const json& w : j["waiting"]) {
    EXPECT_EQ(w["state"], "timed_out") << d.out;
    EXPECT_EQ(w["blocked_by"], json::array({1})) << d.out;  // directly or through the other
  }
  d = doctor(dir);
  EXPECT_NE(d.out.find("BEHIND: rank 1 has not called allreduce #3"), std::string::npos) << d.out;
  fs::remove_all(dir);
}

// Ranks in step: exit 0; a missing directory or a malformed dump: exit 2 naming it.
TEST(CollDoctor, AgreementAndBadInput) {
  NEED_DOCTOR();
  const std::string dir = temp_dir();
  run_ranks(2, flight_opts(dir), [&](int, std::unique_ptr<Rank>& rk) {
    ASSERT_TRUE(rk->comm->barrier().ok());
    ASSERT_TRUE(rk->comm->barrier().ok());
    ASSERT_TRUE(rk->comm->dump_flight_record().ok());
  });
  Doctor d = doctor(dir);
  EXPECT_EQ(d.rc, 0) << d.out;
  EXPECT_NE(d.out.find("OK: all 2 ranks agree"), std::string::npos) << d.out;
  d = doctor(dir + "/nowhere");
  EXPECT_EQ(d.rc, 2) << d.out;
  EXPECT_NE(d.out.find("nowhere"), std::string::npos) << d.out;
  std::ofstream(dir + "/gw-flight-1.json") << "{\"format\": \"gradwire-flight-1\", \"rank\":";
  d = doctor(dir);
  EXPECT_EQ(d.rc, 2) << d.out;
  EXPECT_NE(d.out.find("gw-flight-1.json"), std::string::npos) << d.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gw::coll_test
