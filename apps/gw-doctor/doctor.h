// gw-doctor's model: every rank's flight record (lib/coll/flight_recorder.h) as read from its
// dump, and the diagnosis drawn from all of them together.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gw::doctor {

/// One call as a dump records it.
struct Call {
  uint64_t seq = 0;  ///< 0: point-to-point
  std::string op, dtype, state;
  uint64_t count = 0;
  int root = 0;
  double age_ms = 0;
  std::vector<int> waiting_on;
  /// "allreduce #5(count=1000 float32 root 0)": what a person compares.
  std::string text() const;
  bool rooted() const;  ///< broadcast, gather, scatter
  /// The fields every rank must agree on (op, count, dtype, and root where there is one).
  std::string key() const;
};

struct Peer {
  int rank = 0;
  bool alive = true;
  std::string error;
  std::optional<double> heard_ms_ago;
  uint32_t pending = 0;
};

/// One rank's dump (or health answer).
struct Rank {
  std::string file;  ///< the dump, or "@<socket>" of a health answer
  int rank = 0, size = 0, pid = 0;
  std::string trigger, broken;
  int culprit = -1;
  std::vector<int> waiting_on;
  std::vector<Peer> peers;
  std::vector<Call> calls;                                 ///< oldest first
  std::vector<std::pair<std::string, uint64_t>> counters;  ///< the transport's (health)
  uint64_t last_ok = 0;         ///< highest collective seq that finished ok
  uint64_t last_seen = 0;       ///< highest collective seq started
  const Call* current() const;  ///< the latest collective that did not finish ok, if any
};

/// Reads every gw-flight-*.json of `dir`. @return false with `err` naming the file.
bool load_dir(const std::string& dir, std::vector<Rank>* out, std::string* err);
/// One dump or health answer; throws std::exception saying what is wrong.
Rank parse_rank(const nlohmann::json& j, const std::string& source);

/// A rank of this host whose health socket did not answer.
struct Silent {
  int rank = 0, pid = 0;
  std::string why;  ///< "no answer within 500 ms: process 12 is stopped (SIGSTOP, ...)"
};
/// The ranks of one job on this host, asked live (doctor_live.cc).
struct Job {
  std::string id;  ///< Group::job_id in hex
  std::vector<Rank> ranks;
  std::vector<Silent> silent;
};
/// Asks every health socket of this host (of `job` only, unless empty), all at once, for at
/// most `timeout_ms`. @return one Job per job found.
std::vector<Job> query_live(const std::string& job, int timeout_ms);
/// Prometheus text: each answering rank's counters and progress, labelled job and rank.
std::string prometheus(const Job& j);

struct Mismatch {
  uint64_t seq = 0;
  std::map<std::string, std::vector<int>> calls;  ///< call text -> ranks that made it
  std::vector<int> odd;                           ///< ranks apart from the largest group
};

struct Waiter {
  int rank = 0;
  std::string call, state;
  std::vector<int> on;       ///< peers it waits for
  std::vector<int> blocked;  ///< where its chain of waits ends: ranks not waiting themselves
};

/// Live diagnosis: calls younger than `min_age_ms` are normal progress, not a hang.
struct Live {
  std::vector<Silent> silent;
  double min_age_ms = 1000;
};

struct Diagnosis {
  bool live = false;
  std::vector<Silent> silent;  ///< live: ranks that did not answer (a problem)
  std::vector<int> missing;    ///< ranks below the size without a dump (live: not here)
  uint64_t front = 0;          ///< the furthest seq any rank started
  std::vector<int> behind;     ///< ranks that did not start `front`
  std::vector<Mismatch> mismatches;
  std::vector<Waiter> stuck;
  bool problem() const {
    return (!live && !missing.empty()) || !silent.empty() || !behind.empty() ||
           !mismatches.empty() || !stuck.empty();
  }
};

Diagnosis diagnose(const std::vector<Rank>& ranks, const Live* live = nullptr);
/// The diagnosis in words, for a person.
std::string report(const std::vector<Rank>& ranks, const Diagnosis& d);
/// The same as JSON, for tools.
nlohmann::json report_json(const std::vector<Rank>& ranks, const Diagnosis& d);

}  // namespace gw::doctor
