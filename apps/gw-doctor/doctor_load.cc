// Reading the dumps: every gw-flight-<rank>.json of a directory, checked field by field so a
// bad file is named with what is wrong in it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "doctor.h"

namespace gw::doctor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Call parse_call(const json& j) {
  Call c;
  c.seq = j.at("seq").get<uint64_t>();
  c.op = j.at("op").get<std::string>();
  c.dtype = j.at("dtype").get<std::string>();
  c.state = j.at("state").get<std::string>();
  c.count = j.at("count").get<uint64_t>();
  c.root = j.contains("root") ? j.at("root").get<int>() : j.value("peer", -1);
  c.age_ms = j.value("age_ms", 0.0);
  c.waiting_on = j.value("waiting_on", std::vector<int>{});
  return c;
}

Peer parse_peer(const json& j) {
  Peer p;
  p.rank = j.at("rank").get<int>();
  p.alive = j.at("alive").get<bool>();
  p.error = j.value("error", "");
  const json& h = j.at("last_heard_ms_ago");
  if (!h.is_null()) p.heard_ms_ago = h.get<double>();
  p.pending = j.value("pending_recvs", 0u) + j.value("pending_sends", 0u);
  return p;
}

}  // namespace

Rank parse_rank(const json& j, const std::string& file) {
  if (j.value("format", "") != "gradwire-flight-1")
    throw std::runtime_error("not a gradwire flight record (\"format\" is not gradwire-flight-1)");
  Rank r;
  r.file = file;
  r.rank = j.at("rank").get<int>();
  r.size = j.at("size").get<int>();
  if (r.rank < 0 || r.size < 1 || r.rank >= r.size)
    throw std::runtime_error("rank " + std::to_string(r.rank) + " of " + std::to_string(r.size));
  r.trigger = j.value("trigger", "");
  r.pid = j.value("pid", 0);
  if (j.contains("counters"))
    for (auto& [k, v] : j.at("counters").items()) r.counters.emplace_back(k, v.get<uint64_t>());
  const json& b = j.at("broken");
  if (!b.is_null()) {
    r.broken = b.at("code").get<std::string>() + ": " + b.at("message").get<std::string>();
    r.culprit = b.at("culprit").get<int>();
  }
  r.waiting_on = j.at("waiting_on").get<std::vector<int>>();
  for (const json& p : j.at("peers")) r.peers.push_back(parse_peer(p));
  for (const json& c : j.at("ops")) r.calls.push_back(parse_call(c));
  for (const Call& c : r.calls) {
    if (c.seq == 0) continue;
    r.last_seen = std::max(r.last_seen, c.seq);
    if (c.state == "ok") r.last_ok = std::max(r.last_ok, c.seq);
  }
  return r;
}

bool load_dir(const std::string& dir, std::vector<Rank>* out, std::string* err) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    *err = dir + ": not a directory (give the coll.flight_dir the ranks wrote to)";
    return false;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("gw-flight-", 0) == 0 && n.size() > 15 && n.substr(n.size() - 5) == ".json")
      files.push_back(e.path());
  }
  if (ec) {
    *err = dir + ": " + ec.message();
    return false;
  }
  if (files.empty()) {
    *err = dir + ": no gw-flight-<rank>.json in it";
    return false;
  }
  std::sort(files.begin(), files.end());
  std::set<int> seen;
  for (const fs::path& f : files) {
    std::ifstream in(f);
    if (!in) {
      *err = f.string() + ": cannot be read";
      return false;
    }
    const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      *err = f.string() + ": not valid JSON (cut short while written?)";
      return false;
    }
    try {
      out->push_back(parse_rank(j, f.string()));
    } catch (const std::exception& e) {
      *err = f.string() + ": " + e.what();
      return false;
    }
    if (!seen.insert(out->back().rank).second) {
      *err = f.string() + ": a second dump of rank " + std::to_string(out->back().rank);
      return false;
    }
  }
  std::sort(out->begin(), out->end(), [](const Rank& a, const Rank& b) { return a.rank < b.rank; });
  return true;
}

}  // namespace gw::doctor
