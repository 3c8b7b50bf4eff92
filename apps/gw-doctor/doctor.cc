// gw-doctor's diagnosis: who is behind, which calls differ across ranks at one sequence
// number, and whom each rank that did not finish its last call waits for.
#include "doctor.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

namespace gw::doctor {
namespace {

using nlohmann::json;

std::string ranks_text(const std::vector<int>& rs) {
  std::string s = rs.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < rs.size(); ++i) s += (i ? ", " : "") + std::to_string(rs[i]);
  return s;
}

std::string ms_text(double ms) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.0f ms", ms);
  return b;
}

const Call* find_seq(const Rank& r, uint64_t seq) {
  for (const Call& c : r.calls)
    if (c.seq == seq) return &c;
  return nullptr;
}

std::vector<Mismatch> mismatches(const std::vector<Rank>& ranks, uint64_t front) {
  std::vector<Mismatch> out;
  for (uint64_t s = 1; s <= front; ++s) {
    Mismatch m;
    m.seq = s;
    std::map<std::string, std::vector<int>> by_key;
    for (const Rank& r : ranks) {
      const Call* c = find_seq(r, s);
      // A call refused by a broken communicator has no root: nothing to compare it on.
      if (!c || (c->state == "refused" && c->rooted())) continue;
      by_key[c->key()].push_back(r.rank);
      m.calls[c->text()].push_back(r.rank);
    }
    if (by_key.size() < 2) continue;
    size_t most = 0, ties = 0;
    for (auto& [k, rs] : by_key) most = std::max(most, rs.size());
    for (auto& [k, rs] : by_key) ties += rs.size() == most;
    for (auto& [k, rs] : by_key)  // a tie names no one: either side may be the wrong one
      if (ties == 1 && rs.size() < most) m.odd.insert(m.odd.end(), rs.begin(), rs.end());
    std::sort(m.odd.begin(), m.odd.end());
    out.push_back(std::move(m));
  }
  return out;
}

std::string peer_text(const Rank& r, int p) {
  std::string s = "rank " + std::to_string(p);
  for (const Peer& q : r.peers) {
    if (q.rank != p) continue;
    s += q.alive ? " (alive" : " (its connection failed: " + q.error;
    s += q.heard_ms_ago ? ", last heard " + ms_text(*q.heard_ms_ago) + " ago)" : ", never heard)";
  }
  return s;
}

// Follows the waits through ranks that wait themselves (rank 2 waits for 0, which waits for
// 1): the ranks where the chains end are the ones to look at.
void chain_ends(std::vector<Waiter>& ws) {
  std::map<int, const Waiter*> by_rank;
  for (const Waiter& w : ws) by_rank[w.rank] = &w;
  for (Waiter& w : ws) {
    std::set<int> seen{w.rank}, ends;
    std::vector<int> todo = w.on;
    while (!todo.empty()) {
      const int p = todo.back();
      todo.pop_back();
      if (!seen.insert(p).second) continue;
      auto it = by_rank.find(p);
      if (it == by_rank.end()) {
        ends.insert(p);
      } else {
        todo.insert(todo.end(), it->second->on.begin(), it->second->on.end());
      }
    }
    w.blocked.assign(ends.begin(), ends.end());
  }
}

}  // namespace

std::string Call::text() const {
  std::string s = op + " #" + std::to_string(seq) + "(count=" + std::to_string(count) + " " + dtype;
  if (rooted() && root >= 0) s += " root " + std::to_string(root);
  return s + ")";
}

bool Call::rooted() const { return op == "broadcast" || op == "gather" || op == "scatter"; }

std::string Call::key() const {
  return op + "|" + std::to_string(count) + "|" + dtype + "|" +
         (rooted() ? std::to_string(root) : "");
}

const Call* Rank::current() const {
  for (auto it = calls.rbegin(); it != calls.rend(); ++it)
    if (it->seq != 0) return it->state == "ok" ? nullptr : &*it;
  return nullptr;
}

Diagnosis diagnose(const std::vector<Rank>& ranks, const Live* live) {
  Diagnosis d;
  const double min_age = live ? live->min_age_ms : 0;
  int size = 0;
  std::set<int> have;
  for (const Rank& r : ranks) {
    size = std::max(size, r.size);
    have.insert(r.rank);
    d.front = std::max(d.front, r.last_seen);
  }
  if (live) {
    d.live = true;
    d.silent = live->silent;
    for (const Silent& s : live->silent) have.insert(s.rank);
  }
  for (int r = 0; r < size; ++r)
    if (!have.count(r)) d.missing.push_back(r);
  // Live: a rank is behind only once the ranks ahead have waited in the next call a while.
  bool front_old = !live;
  for (const Rank& r : ranks) {
    const Call* c = find_seq(r, d.front);
    if (c && (c->state != "running" || c->age_ms >= min_age)) front_old = true;
  }
  for (const Rank& r : ranks)
    if (r.last_seen < d.front && front_old) d.behind.push_back(r.rank);
  d.mismatches = mismatches(ranks, d.front);
  for (const Rank& r : ranks) {
    const Call* c = r.current();
    if (!c || (c->state == "running" && c->age_ms < min_age)) continue;
    Waiter w{r.rank, c->text(), c->state, {}};
    std::set<int> on(r.waiting_on.begin(), r.waiting_on.end());
    on.insert(c->waiting_on.begin(), c->waiting_on.end());
    for (const Peer& p : r.peers)
      if (!p.alive) on.insert(p.rank);
    if (on.empty() && r.culprit >= 0 && r.culprit != r.rank) on.insert(r.culprit);
    w.on.assign(on.begin(), on.end());
    d.stuck.push_back(std::move(w));
  }
  chain_ends(d.stuck);
  return d;
}

std::string report(const std::vector<Rank>& ranks, const Diagnosis& d) {
  std::string o;
  for (const Rank& r : ranks) {
    o += "rank " + std::to_string(r.rank) + ": last finished #" + std::to_string(r.last_ok);
    const Call* c = r.current();
    o += c ? "; in " + c->text() + ", " + c->state + " after " + ms_text(c->age_ms)
           : "; nothing in flight";
    o += r.trigger == "health" ? "\n" : " [dump: " + r.trigger + "]\n";
    if (!r.broken.empty()) o += "  broken: " + r.broken + "\n";
  }
  for (const Silent& s : d.silent)
    o += "NOT ANSWERING: rank " + std::to_string(s.rank) + ": " + s.why + "\n";
  if (!d.missing.empty() && d.live) {
    o += "NOT HERE: no health socket of " + ranks_text(d.missing) +
         " on this host (another host's, or gone: see their peers' view)\n";
  } else if (!d.missing.empty()) {
    o += "MISSING: no dump from " + ranks_text(d.missing) + "\n";
  }
  for (int b : d.behind) {
    const Rank& r = *std::find_if(ranks.begin(), ranks.end(), [&](auto& x) { return x.rank == b; });
    std::string next = "#" + std::to_string(r.last_seen + 1);
    std::vector<int> ahead;
    for (const Rank& a : ranks) {
      if (a.last_seen <= r.last_seen) continue;
      ahead.push_back(a.rank);
      if (const Call* c = find_seq(a, r.last_seen + 1)) next = c->text();
    }
    o += "BEHIND: rank " + std::to_string(b) + " has not called " + next + " (its last call is #" +
         std::to_string(r.last_seen) + "), which " + ranks_text(ahead) +
         (ahead.size() == 1 ? " is" : " are") + " in or past\n";
  }
  for (const Mismatch& m : d.mismatches) {
    o += "MISMATCH at #" + std::to_string(m.seq) + ":";
    for (auto& [call, rs] : m.calls) o += " " + call + " on " + ranks_text(rs) + ";";
    o += m.odd.empty() ? " no majority: check each rank's code path\n"
                       : " " + ranks_text(m.odd) + " called differently from the others\n";
  }
  for (const Waiter& w : d.stuck) {
    const Rank& r =
        *std::find_if(ranks.begin(), ranks.end(), [&](auto& x) { return x.rank == w.rank; });
    o += "WAITING: rank " + std::to_string(w.rank) + " in " + w.call + " (" + w.state + ")";
    if (w.on.empty()) o += " waits for no peer (a local error)";
    for (size_t i = 0; i < w.on.size(); ++i)
      o += (i ? ", " : " waits for ") + peer_text(r, w.on[i]);
    if (!w.blocked.empty() && w.blocked != w.on) o += "; blocked by " + ranks_text(w.blocked);
    o += "\n";
  }
  if (!d.problem() && d.live)
    o +=
        "OK: the " + std::to_string(ranks.size()) + " ranks here answer, agree and none is stuck\n";
  else if (!d.problem())
    o += "OK: all " + std::to_string(ranks.size()) + " ranks agree and none is stuck\n";
  return o;
}

json report_json(const std::vector<Rank>& ranks, const Diagnosis& d) {
  json j;
  j["ok"] = !d.problem();
  j["front"] = d.front;
  j["ranks"] = json::array();
  for (const Rank& r : ranks) {
    const Call* c = r.current();
    j["ranks"].push_back({{"rank", r.rank},
                          {"file", r.file},
                          {"trigger", r.trigger},
                          {"last_finished", r.last_ok},
                          {"last_started", r.last_seen},
                          {"current", c ? json(c->text()) : json(nullptr)},
                          {"state", c ? json(c->state) : json(nullptr)},
                          {"broken", r.broken.empty() ? json(nullptr) : json(r.broken)}});
  }
  j["missing"] = d.missing;
  j["not_answering"] = json::array();
  for (const Silent& s : d.silent)
    j["not_answering"].push_back({{"rank", s.rank}, {"pid", s.pid}, {"why", s.why}});
  j["behind"] = d.behind;
  j["mismatches"] = json::array();
  for (const Mismatch& m : d.mismatches)
    j["mismatches"].push_back({{"seq", m.seq}, {"calls", m.calls}, {"odd_ranks", m.odd}});
  j["waiting"] = json::array();
  for (const Waiter& w : d.stuck)
    j["waiting"].push_back({{"rank", w.rank},
                            {"call", w.call},
                            {"state", w.state},
                            {"on", w.on},
                            {"blocked_by", w.blocked}});
  return j;
}

// Exposition format: each metric's samples together under its one TYPE line.
std::string prometheus(const Job& j) {
  std::map<std::string, std::string> by_metric;  // name -> its sample lines
  auto sample = [&](const std::string& name, int rank, uint64_t v) {
    std::string m = "gradwire_" + name;
    for (char& ch : m)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    by_metric[m] += m + "{job=\"" + j.id + "\",rank=\"" + std::to_string(rank) + "\"} " +
                    std::to_string(v) + "\n";
  };
  for (const Rank& r : j.ranks) {
    sample("up", r.rank, 1);
    sample("last_finished_seq", r.rank, r.last_ok);
    sample("last_started_seq", r.rank, r.last_seen);
    sample("broken", r.rank, r.broken.empty() ? 0 : 1);
    for (const auto& [k, v] : r.counters) sample(k, r.rank, v);
  }
  for (const Silent& s : j.silent) sample("up", s.rank, 0);  // its health socket did not answer
  std::string o;
  for (const auto& [m, lines] : by_metric) o += "# TYPE " + m + " gauge\n" + lines;
  return o;
}

}  // namespace gw::doctor
