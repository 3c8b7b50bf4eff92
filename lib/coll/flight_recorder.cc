// Flight recorder: the ring (a seqlock per slot), its JSON dump, and the SIGUSR1 flag.
#include "flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "coll_task.h"
#include "gw_coll_types.h"
#include "gw_time.h"

namespace gw::coll {
namespace {

std::atomic<uint32_t> g_signals{0};

// Async-signal-safe: one lock-free atomic increment; the dump happens on the driving thread.
extern "C" void on_sigusr1(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

void put_str(std::string& o, std::string_view s) {
  o += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      o += buf;
    } else {
      o += c;
    }
  }
  o += '"';
}

void put_ranks(std::string& o, uint64_t mask) {
  o += '[';
  bool first = true;
  for (int r = 0; r < 64; ++r) {
    if (!(mask >> r & 1)) continue;
    if (!first) o += ',';
    first = false;
    o += std::to_string(r);
  }
  o += ']';
}

Status sys_error(const std::string& what) {
  const int e = errno;
  return Status(Code::kSystemError, what + ": " + std::strerror(e), e);
}

std::string ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

void put_entry(std::string& o, const FlightEntry& e, int64_t now) {
  const bool p2p =
      e.kind == static_cast<uint8_t>(Kind::kSend) || e.kind == static_cast<uint8_t>(Kind::kRecv);
  o +=
      "    {\"id\": " + std::to_string(e.id) + ", \"seq\": " + std::to_string(e.seq) + ", \"op\": ";
  put_str(o, kind_name(static_cast<Kind>(e.kind)));
  o += ", \"dtype\": ";
  put_str(o, dtype_name(static_cast<DataType>(e.dtype)));
  o += ", \"count\": " + std::to_string(e.count) + ", \"bytes\": " + std::to_string(e.bytes);
  if (e.kind == static_cast<uint8_t>(Kind::kAllreduce) ||
      e.kind == static_cast<uint8_t>(Kind::kReduceScatter)) {
    o += ", \"reduce\": ";
    put_str(o, op_name(static_cast<ReduceOp>(e.rop)));
  }
  if (e.kind == static_cast<uint8_t>(Kind::kAllreduce)) {
    o += ", \"algo\": ";
    put_str(o, algo_name(static_cast<Algo>(e.algo)));
  }
  o += std::string(p2p ? ", \"peer\": " : ", \"root\": ") + std::to_string(e.root);
  o += ", \"device\": " + std::string(e.device ? "true" : "false") + ", \"state\": ";
  put_str(o, flight_state_name(static_cast<FlightState>(e.state)));
  o += ", \"code\": ";
  put_str(o, code_name(static_cast<Code>(e.code)));
  o += ", \"start_ns\": " + std::to_string(e.start_ns) + ", \"age_ms\": " + ms(now - e.start_ns);
  if (e.end_ns) o += ", \"duration_ms\": " + ms(e.end_ns - e.start_ns);
  o += ", \"waiting_on\": ";
  put_ranks(o, e.waiting);
  o += '}';
}

void put_peers(std::string& o, const FlightContext& c, int64_t now, uint64_t* waiting) {
  o += "  \"peers\": [\n";
  for (size_t i = 0; i < c.peers.size(); ++i) {
    const FlightPeer& p = c.peers[i];
    if ((p.pending_recvs || p.pending_sends) && p.rank < 64) *waiting |= uint64_t{1} << p.rank;
    o += "    {\"rank\": " + std::to_string(p.rank) +
         ", \"alive\": " + (p.endpoint_ok ? "true" : "false") + ", \"error\": ";
    put_str(o, p.error);
    o += ", \"last_heard_ms_ago\": " + (p.last_heard_ns ? ms(now - p.last_heard_ns) : "null") +
         ", \"pending_recvs\": " + std::to_string(p.pending_recvs) +
         ", \"pending_sends\": " + std::to_string(p.pending_sends) + "}";
    o += i + 1 < c.peers.size() ? ",\n" : "\n";
  }
  o += "  ],\n";
}

void put_counters(std::string& o, const FlightContext& c) {
  o += ",\n  \"counters_age_ms\": " + ms(c.counters_age_ns) + ",\n  \"counters\": {";
  for (size_t i = 0; i < c.counters.size(); ++i) {
    o += i ? ", " : "";
    put_str(o, c.counters[i].first);
    o += ": " + std::to_string(c.counters[i].second);
  }
  o += '}';
}

}  // namespace

const char* flight_state_name(FlightState s) {
  switch (s) {
    case FlightState::kRunning:
      return "running";
    case FlightState::kOk:
      return "ok";
    case FlightState::kFailed:
      return "failed";
    case FlightState::kTimedOut:
      return "timed_out";
    case FlightState::kAborted:
      return "aborted";
    case FlightState::kRefused:
      return "refused";
  }
  return "?";
}

FlightRecorder::FlightRecorder(size_t capacity)
    : cap_(capacity), slots_(std::make_unique<Slot[]>(capacity)) {}

void FlightRecorder::store(Slot& s, const FlightEntry& e) {
  uint64_t w[kWords];
  std::memcpy(w, &e, sizeof(w));
  const uint64_t st = s.stamp.load(std::memory_order_relaxed);
  s.stamp.store(st + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // odd stamp before any word
  for (size_t i = 0; i < kWords; ++i) s.w[i].store(w[i], std::memory_order_relaxed);
  s.stamp.store(st + 2, std::memory_order_release);
}

bool FlightRecorder::load(const Slot& s, FlightEntry* e) const {
  for (int tries = 0; tries < 1000; ++tries) {
    const uint64_t a = s.stamp.load(std::memory_order_acquire);
    if (a & 1) continue;
    uint64_t w[kWords];
    for (size_t i = 0; i < kWords; ++i) w[i] = s.w[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);  // words before the second stamp
    if (s.stamp.load(std::memory_order_relaxed) != a) continue;
    std::memcpy(e, w, sizeof(w));
    return true;
  }
  return false;  // the writer kept it busy: left out rather than torn
}

uint64_t FlightRecorder::begin(FlightEntry e) {
  const uint64_t id = next_.load(std::memory_order_relaxed);
  e.id = id;
  e.state = static_cast<uint8_t>(FlightState::kRunning);
  store(slots_[id % cap_], e);
  next_.store(id + 1, std::memory_order_release);
  return id;
}

void FlightRecorder::end(uint64_t id, FlightState s, uint8_t code, uint64_t waiting,
                         int64_t end_ns) {
  if (id == 0) return;
  Slot& slot = slots_[id % cap_];
  FlightEntry e;
  if (!load(slot, &e) || e.id != id || e.state != static_cast<uint8_t>(FlightState::kRunning))
    return;
  e.state = static_cast<uint8_t>(s);
  e.code = code;
  e.waiting = waiting;
  e.end_ns = end_ns;
  store(slot, e);
}

std::vector<FlightEntry> FlightRecorder::snapshot(size_t last) const {
  const uint64_t next = next_.load(std::memory_order_acquire);
  const uint64_t keep = std::min<uint64_t>(cap_, last);
  const uint64_t first =
      std::max(next > keep ? next - keep : 1, first_.load(std::memory_order_acquire));
  std::vector<FlightEntry> out;
  out.reserve(static_cast<size_t>(next - first));
  for (uint64_t id = first; id < next; ++id) {
    FlightEntry e;
    if (load(slots_[id % cap_], &e) && e.id == id) out.push_back(e);
  }
  return out;
}

std::string FlightRecorder::json(const FlightContext& c, size_t last) const {
  const std::vector<FlightEntry> es = snapshot(last);
  const auto now = static_cast<int64_t>(now_ns());
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  std::string o = "{\n  \"format\": \"gradwire-flight-1\",\n  \"rank\": " + std::to_string(c.rank) +
                  ",\n  \"size\": " + std::to_string(c.size) +
                  ",\n  \"pid\": " + std::to_string(getpid()) + ",\n  \"trigger\": ";
  put_str(o, c.trigger);
  o += ",\n  \"transport\": ";
  put_str(o, c.transport);
  if (!c.job.empty()) {
    o += ",\n  \"job\": ";
    put_str(o, c.job);
  }
  o += ",\n  \"now_ns\": " + std::to_string(now) + ",\n  \"unix_ms\": " + std::to_string(wall);
  o += ",\n  \"capacity\": " + std::to_string(cap_) +
       ",\n  \"recorded\": " + std::to_string(recorded()) + ",\n  \"broken\": ";
  if (c.broken.ok()) {
    o += "null";
  } else {
    o += "{\"code\": ";
    put_str(o, code_name(c.broken.code()));
    o += ", \"culprit\": " + std::to_string(c.broken.rank()) + ", \"message\": ";
    put_str(o, c.broken.message());
    o += '}';
  }
  o += ",\n";
  uint64_t waiting = 0;
  put_peers(o, c, now, &waiting);
  o += "  \"waiting_on\": ";
  put_ranks(o, c.waiting_known ? c.waiting : waiting);
  if (c.counters_age_ns >= 0) put_counters(o, c);
  o += ",\n  \"ops\": [\n";
  for (size_t i = 0; i < es.size(); ++i) {
    put_entry(o, es[i], now);
    o += i + 1 < es.size() ? ",\n" : "\n";
  }
  o += "  ]\n}\n";
  return o;
}

Status FlightRecorder::write_json(const std::string& path, const FlightContext& c) const {
  const std::string o = json(c, cap_);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return sys_error("coll: flight record " + tmp);
  const bool ok = std::fwrite(o.data(), 1, o.size(), f) == o.size();
  if (std::fclose(f) != 0 || !ok) return sys_error("coll: writing flight record " + tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return sys_error("coll: renaming flight record to " + path);
  return Status();
}

std::string flight_path(const std::string& dir, int rank) {
  std::string d = dir;
  if (d.empty()) {
    const char* t = std::getenv("TMPDIR");
    d = t && *t ? t : "/tmp";
  }
  return d + "/gw-flight-" + std::to_string(rank) + ".json";
}

bool flight_install_signal() {
  static const bool ok = [] {
    struct sigaction old {};
    if (sigaction(SIGUSR1, nullptr, &old) != 0) return false;
    if (old.sa_handler == on_sigusr1) return true;
    // The application's own handler (or SIG_IGN) stays: SIGUSR1 is its to use.
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return false;
    struct sigaction sa {};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(SIGUSR1, &sa, nullptr) == 0;
  }();
  return ok;
}

uint32_t flight_signals() { return g_signals.load(std::memory_order_relaxed); }

}  // namespace gw::coll
