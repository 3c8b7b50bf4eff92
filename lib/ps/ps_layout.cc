// PsLayout: key-range sharding with large keys cut at server boundaries.
#include <algorithm>
#include <numeric>
#include <string>

#include "gw_ps_layout.h"

namespace gw {

namespace {

struct Piece {
  uint32_t server;
  uint64_t offset, count;
};

// Cut [g, g + n) of the global sequence at the server boundaries, then merge pieces smaller
// than min_part into their larger neighbour until none is left (or one piece remains).
std::vector<Piece> cut_key(uint64_t g, uint64_t n, uint64_t total, int servers, uint64_t min_part) {
  auto owner = [&](uint64_t e) {
    // Largest s with floor(total*s/servers) <= e.
    auto s = static_cast<int>(static_cast<__uint128_t>(e) * servers / total);
    while (s > 0 && static_cast<__uint128_t>(total) * s / servers > e) --s;
    while (s + 1 < servers && static_cast<__uint128_t>(total) * (s + 1) / servers <= e) ++s;
    return s;
  };
  auto start_of = [&](int s) {
    return static_cast<uint64_t>(static_cast<__uint128_t>(total) * s / servers);
  };
  std::vector<Piece> v;
  for (uint64_t e = g; e < g + n;) {
    int s = owner(e);
    uint64_t end = s + 1 < servers ? std::min(g + n, start_of(s + 1)) : g + n;
    v.push_back({static_cast<uint32_t>(s), e - g, end - e});
    e = end;
  }
  for (;;) {
    if (v.size() < 2) break;
    size_t small = v.size();
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].count < min_part && (small == v.size() || v[i].count < v[small].count)) small = i;
    }
    if (small == v.size()) break;
    size_t into = small == 0                                 ? 1
                  : small + 1 == v.size()                    ? small - 1
                  : v[small - 1].count >= v[small + 1].count ? small - 1
                                                             : small + 1;
    Piece& d = v[into];
    d.offset = std::min(d.offset, v[small].offset);
    d.count += v[small].count;
    v.erase(v.begin() + static_cast<long>(small));
  }
  return v;
}

}  // namespace

Result<PsLayout> PsLayout::make(std::span<const KeySpec> keys, int servers, uint64_t min_part) {
  if (servers < 1) {
    return Status(Code::kInvalidArgument,
                  "ps: " + std::to_string(servers) + " servers; at least 1 is needed");
  }
  if (keys.empty()) return Status(Code::kInvalidArgument, "ps: no keys declared");
  PsLayout l;
  l.keys_.assign(keys.begin(), keys.end());
  l.servers_ = servers;
  l.min_part_ = std::max<uint64_t>(1, min_part);
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (keys[i].count == 0) {
      return Status(Code::kInvalidArgument,
                    "ps: key " + std::to_string(keys[i].key) + " has 0 elements");
    }
    if (!l.index_.emplace(keys[i].key, i).second) {
      return Status(Code::kInvalidArgument,
                    "ps: key " + std::to_string(keys[i].key) + " is declared twice");
    }
    l.total_ += keys[i].count;
  }
  std::vector<uint32_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return keys[a].key < keys[b].key; });
  l.first_.assign(keys.size(), 0);
  l.nparts_.assign(keys.size(), 0);
  l.load_.assign(static_cast<size_t>(servers), 0);
  uint64_t g = 0;
  for (uint32_t ki : order) {
    l.first_[ki] = static_cast<uint32_t>(std::min(l.parts_.size(), kMaxParts));
    for (const Piece& p : cut_key(g, keys[ki].count, l.total_, servers, l.min_part_)) {
      l.parts_.push_back({ki, p.server, p.offset, p.count});
      l.load_[p.server] += p.count;
      ++l.nparts_[ki];
    }
    if (l.parts_.size() > kMaxParts) {
      return Status(Code::kInvalidArgument,
                    "ps: layout has more than " + std::to_string(kMaxParts) +
                        " parts; use fewer keys or a larger ps.min_part_bytes");
    }
    g += keys[ki].count;
  }
  return l;
}

std::optional<uint32_t> PsLayout::find(uint64_t key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

}  // namespace gw
