// gw-incast: many senders into one receiver (issue 44's incast), over any transport. Rank 0
// receives; ranks 1..N-1 each keep --window messages of --size bytes in flight to it for
// --seconds. Every message carries its sender, sequence number and send time; the receiver
// checks every 8-byte word, and reports the aggregate goodput, each sender's share (Jain's
// fairness index), one-way latency percentiles (the ranks share the machine's monotonic
// clock: namespaces of one kernel) and retransmissions (the dpdk driver's counters; tcp: the
// sender's network namespace's RetransSegs / OutSegs from /proc/net/snmp).
//
//   usertools/gw-cluster.sh --hosts 8 --rate 1gbit -- build/apps/gw-incast/gw-incast
//       -t 'tcp:iface={iface}' -s 1048576 --seconds 10
// Launched by any launcher (GW_RANK/GW_WORLD_SIZE/GW_MASTER_*; torchrun's; Open MPI's).
// Prints one line per sender and a summary; --json adds one JSON object (rank 0).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gw_group.h"
#include "gw_store.h"
#include "gw_time.h"
#include "gw_transport.h"

namespace {

using gw::Code;
using gw::Completion;
using gw::Op;
using gw::Status;

constexpr uint64_t kDataTag = 0x1C0, kDoneTag = 0x1C1;
constexpr size_t kHeaderWords = 3;  // sender, sequence, send time (ns)

struct Opts {
  std::string transport = "tcp:iface=lo";
  size_t size = 1 << 20;
  double seconds = 5;
  int window = 4;
  int timeout_s = 60;
  bool json = false;
};

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t word(uint64_t sender, uint64_t seq, size_t i) {
  return (seq * 0x9E3779B97F4A7C15ULL) ^ (sender << 56) ^ i;
}

void fill(uint64_t* w, size_t words, uint64_t sender, uint64_t seq) {
  w[0] = sender;
  w[1] = seq;
  for (size_t i = kHeaderWords; i < words; ++i) w[i] = word(sender, seq, i);
  w[2] = now_ns();  // last: the time it is handed to the transport
}

// Words that differ from what `sender` put in message `seq`.
size_t wrong_words(const uint64_t* w, size_t words, uint64_t sender, uint64_t seq) {
  size_t bad = (w[0] != sender) + (w[1] != seq);
  for (size_t i = kHeaderWords; i < words; ++i) bad += w[i] != word(sender, seq, i);
  return bad;
}

// This network namespace's TCP segments out and retransmitted (/proc/net/snmp "Tcp:" rows).
std::pair<uint64_t, uint64_t> tcp_segments() {
  std::ifstream f("/proc/net/snmp");
  std::string names, values, line;
  while (std::getline(f, line)) {
    if (line.rfind("Tcp:", 0) != 0) continue;
    if (names.empty())
      names = line;
    else
      values = line;
  }
  std::istringstream n(names), v(values);
  std::string key, val;
  uint64_t out = 0, retx = 0;
  while (n >> key && v >> val) {
    if (key == "OutSegs") out = std::stoull(val);
    if (key == "RetransSegs") retx = std::stoull(val);
  }
  return {out, retx};
}

// Polls until `done` or the deadline; backs off (sleep_poll) when nothing completes, so that
// 8 ranks on 2 cores do not starve each other.
template <class F>
Status drive(gw::Transport& t, const gw::Deadline& dl, F&& on) {
  Completion cs[64];
  int idle = 0;
  while (!dl.expired()) {
    auto n = idle > 64 ? t.cq().sleep_poll(cs, 1) : t.cq().poll(cs);
    if (!n.ok()) return n.status();
    idle = *n ? 0 : idle + 1;
    for (size_t i = 0; i < *n; ++i) {
      if (cs[i].code != Code::kOk) {
        return Status(cs[i].code,
                      "gw-incast: a request to or from rank " + std::to_string(cs[i].peer_id) +
                          " failed: " + (cs[i].ep ? cs[i].ep->status().to_string() : ""));
      }
      auto r = on(cs[i]);
      if (!r.ok() || *r) return r.status();
    }
  }
  return Status(Code::kTimeout, "gw-incast: not finished within --timeout");
}

struct Buffers {
  std::vector<uint64_t> mem;
  gw::MemoryRegion mr;
  const gw::MemoryRegion* mrp = nullptr;
  Status init(gw::Transport& t, size_t words) {
    mem.assign(words, 0);
    if (!t.properties().requires_registration) return Status();
    auto r = t.register_memory(mem.data(), words * 8, gw::MemKind::kHost);
    if (!r.ok()) return r.status();
    mr = std::move(*r);
    mrp = &mr;
    return Status();
  }
};

int run_sender(const Opts& o, gw::Group& g, gw::Store& store) {
  gw::Transport& t = g.transport();
  gw::Endpoint& ep = g.endpoint(0);
  const size_t words = o.size / 8;
  Buffers b;
  if (auto st = b.init(t, words * static_cast<size_t>(o.window) + 1); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  if (auto st = store.wait(std::vector<std::string>{"incast/go"}, gw::Millis(o.timeout_s * 1000));
      !st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", g.rank(), st.to_string().c_str());
    return 1;
  }
  const auto [out0, retx0] = tcp_segments();
  const auto stats0 = t.stats();
  const uint64_t me = static_cast<uint64_t>(g.rank()), end = now_ns() + o.seconds * 1e9;
  uint64_t seq = 0, done = 0;
  int inflight = 0;
  auto post = [&](int slot) -> Status {
    uint64_t* w = b.mem.data() + static_cast<size_t>(slot) * words;
    fill(w, words, me, seq);
    gw::SendRequest r{w, o.size, kDataTag, static_cast<uint64_t>(slot), b.mrp};
    auto k = ep.post_send({&r, 1});
    if (!k.ok()) return k.status();
    if (*k != 1) return Status(Code::kUnavailable, "gw-incast: send queue full");
    ++seq;
    ++inflight;
    return Status();
  };
  for (int s = 0; s < o.window; ++s)
    if (auto st = post(s); !st.ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;
  gw::Deadline dl(gw::Millis(static_cast<int64_t>(o.seconds * 1000) + o.timeout_s * 1000));
  Status st = drive(t, dl, [&](const Completion& c) -> gw::Result<bool> {
    if (c.op != Op::kSend) return false;
    --inflight;
    if (c.wr_id == static_cast<uint64_t>(o.window)) return true;  // the done message
    ++done;
    if (now_ns() < end) {
      GW_RETURN_IF_ERROR(post(static_cast<int>(c.wr_id)));
    } else if (inflight == 0) {  // every data message is out: say how many
      uint64_t* w = b.mem.data() + static_cast<size_t>(o.window) * words;
      w[0] = done;
      gw::SendRequest r{w, 8, kDoneTag, static_cast<uint64_t>(o.window), b.mrp};
      GW_ASSIGN_OR_RETURN(auto k, ep.post_send({&r, 1}));
      if (k != 1) return Status(Code::kUnavailable, "gw-incast: send queue full");
      ++inflight;
    }
    return false;
  });
  if (!st.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", g.rank(), st.to_string().c_str());
    return 1;
  }
  // Retransmissions: the driver's own counters where it has them (dpdk), else the kernel's.
  const auto stats1 = t.stats();
  auto delta = [&](const char* k) {
    auto a = stats1.find(k), z = stats0.find(k);
    return a == stats1.end() ? 0 : a->second - (z == stats0.end() ? 0 : z->second);
  };
  const auto [out1, retx1] = tcp_segments();
  uint64_t pkts = delta("pkts_sent"), retx = delta("retransmits");
  if (!stats1.count("retransmits")) pkts = out1 - out0, retx = retx1 - retx0;
  char v[96];
  std::snprintf(v, sizeof(v), "%" PRIu64 " %" PRIu64 " %" PRIu64, done, pkts, retx);
  (void)store.set("incast/sender/" + std::to_string(g.rank()), v);
  return 0;
}

struct Recv {
  uint64_t bytes = 0, msgs = 0, next_seq = 0, wrong = 0, expected = UINT64_MAX;
};

int run_receiver(const Opts& o, gw::Group& g, gw::Store& store) {
  gw::Transport& t = g.transport();
  const int n = g.size(), w = o.window;
  const size_t words = o.size / 8, per = static_cast<size_t>(w) + 1;
  Buffers b;
  if (auto st = b.init(t, words * per * static_cast<size_t>(n)); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  auto slot = [&](int peer, int s) {
    return b.mem.data() + (static_cast<size_t>(peer) * per + static_cast<size_t>(s)) * words;
  };
  auto post = [&](int peer, int s) -> Status {
    const bool done = s == w;
    gw::RecvRequest r{slot(peer, s), done ? 8 : o.size, done ? kDoneTag : kDataTag,
                      static_cast<uint64_t>(peer) * per + static_cast<uint64_t>(s), b.mrp};
    GW_ASSIGN_OR_RETURN(auto k, g.endpoint(peer).post_recv({&r, 1}));
    return k == 1 ? Status() : Status(Code::kUnavailable, "gw-incast: receive queue full");
  };
  for (int p = 1; p < n; ++p)
    for (int s = 0; s <= w; ++s)
      if (auto st = post(p, s); !st.ok())
        return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;
  std::vector<Recv> rx(static_cast<size_t>(n));
  std::vector<uint64_t> lat;
  lat.reserve(1 << 20);
  uint64_t first = 0, last = 0;
  int finished = 0;
  (void)store.set("incast/go", "1");
  gw::Deadline dl(gw::Millis(static_cast<int64_t>(o.seconds * 1000) + o.timeout_s * 1000));
  Status st = drive(t, dl, [&](const Completion& c) -> gw::Result<bool> {
    const int peer = static_cast<int>(c.wr_id / per), s = static_cast<int>(c.wr_id % per);
    Recv& r = rx[static_cast<size_t>(peer)];
    if (s == w) {
      r.expected = slot(peer, s)[0];
    } else {
      const uint64_t t1 = now_ns();
      const uint64_t* m = slot(peer, s);
      if (!first) first = t1;
      last = t1;
      lat.push_back(t1 - m[2]);
      r.wrong +=
          c.len != o.size ? words : wrong_words(m, words, static_cast<uint64_t>(peer), r.next_seq);
      ++r.next_seq;
      r.bytes += c.len;
      ++r.msgs;
      GW_RETURN_IF_ERROR(post(peer, s));
    }
    if (r.msgs == r.expected) {
      r.expected = UINT64_MAX - 1;  // counted once
      if (++finished == n - 1) return true;
    }
    return false;
  });
  if (!st.ok()) {
    std::fprintf(stderr, "rank 0: %s\n", st.to_string().c_str());
    return 1;
  }
  const double secs = static_cast<double>(last - first) / 1e9;
  double sum = 0, sq = 0;
  uint64_t wrong = 0, pkts = 0, retx = 0;
  for (int p = 1; p < n; ++p) {
    const Recv& r = rx[static_cast<size_t>(p)];
    const double gbps = static_cast<double>(r.bytes) * 8 / secs / 1e9;
    sum += gbps;
    sq += gbps * gbps;
    wrong += r.wrong;
    auto v = store.get("incast/sender/" + std::to_string(p), gw::Millis(o.timeout_s * 1000));
    uint64_t d = 0, k = 0, x = 0;
    if (v.ok()) std::sscanf(v->c_str(), "%" SCNu64 " %" SCNu64 " %" SCNu64, &d, &k, &x);
    pkts += k;
    retx += x;
    std::printf("sender %d: %" PRIu64 " messages, %.3f Gbit/s, %" PRIu64
                " wrong words, "
                "retransmitted %" PRIu64 " of %" PRIu64 " packets\n",
                p, r.msgs, gbps, r.wrong, x, k);
  }
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double q) {
    return lat.empty() ? 0.0
                       : static_cast<double>(
                             lat[std::min(lat.size() - 1, static_cast<size_t>(q * lat.size()))]) /
                             1e3;
  };
  const double jain = sq > 0 ? sum * sum / ((n - 1) * sq) : 0;
  const double retx_pct = pkts ? 100.0 * static_cast<double>(retx) / static_cast<double>(pkts) : 0;
  std::printf(
      "incast: %d senders -> 1, %zu B messages, window %d, %.2f s: %.3f Gbit/s, Jain %.3f, "
      "latency p50 %.0f us p99 %.0f us, retransmitted %.2f %% of packets, %" PRIu64
      " wrong words\n",
      n - 1, o.size, w, secs, sum, jain, pct(0.5), pct(0.99), retx_pct, wrong);
  if (o.json) {
    std::printf(
        "{\"senders\":%d,\"bytes\":%zu,\"window\":%d,\"seconds\":%.3f,\"gbps\":%.4f,"
        "\"jain\":%.4f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"retx_pct\":%.3f,\"wrong\":%" PRIu64
        ",\"transport\":\"%s\"}\n",
        n - 1, o.size, w, secs, sum, jain, pct(0.5), pct(0.99), retx_pct, wrong,
        t.properties().name.c_str());
  }
  return wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  CLI::App app{"gw-incast: N-1 senders into rank 0, goodput, fairness, latency, retransmits"};
  app.add_option("-t,--transport", o.transport, "transport spec");
  app.add_option("-s,--size", o.size, "message bytes (multiple of 8, >= 32)");
  app.add_option("--seconds", o.seconds, "how long each sender sends");
  app.add_option("-w,--window", o.window, "messages in flight per sender")
      ->check(CLI::Range(1, 64));
  app.add_option("--timeout", o.timeout_s, "seconds for set-up and the drain after --seconds");
  app.add_flag("--json", o.json, "also one JSON line (rank 0)");
  CLI11_PARSE(app, argc, argv);
  if (o.size % 8 || o.size < 32) {
    std::fprintf(stderr, "gw-incast: --size must be a multiple of 8 and at least 32\n");
    return 2;
  }
  auto info = gw::discover_launch();
  if (!info.ok() || info->world_size < 2) {
    std::fprintf(stderr, "gw-incast: run it under a launcher with 2+ ranks (%s)\n",
                 info.ok() ? "world size 1" : info.status().to_string().c_str());
    return 2;
  }
  auto store = gw::store_for_launch(*info, gw::Millis(o.timeout_s * 1000));
  auto t = store.ok() ? gw::Transport::open(o.transport) : store.status();
  if (!t.ok()) {
    std::fprintf(stderr, "gw-incast: rank %d: %s\n", info->rank, t.status().to_string().c_str());
    return 1;
  }
  auto g = gw::Group::create(*store, std::move(*t), info->rank, info->world_size,
                             gw::Millis(o.timeout_s * 1000), "incast");
  if (!g.ok()) {
    std::fprintf(stderr, "gw-incast: rank %d: %s\n", info->rank, g.status().to_string().c_str());
    return 1;
  }
  int rc = info->rank == 0 ? run_receiver(o, **g, **store) : run_sender(o, **g, **store);
  // Stay until the receiver has read every sender's figures (a closing sender's connection
  // must not fail the receiver's last receives).
  if (rc == 0 && info->rank == 0) (void)(*store)->set("incast/end", "1");
  if (rc == 0 && info->rank != 0)
    (void)(*store)->wait(std::vector<std::string>{"incast/end"}, gw::Millis(o.timeout_s * 1000));
  return rc;
}
