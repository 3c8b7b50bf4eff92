// PsServer data path: pushes land in staging slots (any-source receives) and are summed (BSP)
// or applied (ASP/SSP); pulls are answered from the registered shard once the consistency
// condition holds. The shard is not written while a reply is being sent from it.
#include <algorithm>
#include <climits>

#include "log.h"
#include "ps_server.h"

namespace gw {

using ps::CtrlMsg;
using ps::MsgType;
using ps::WrKind;

void PsServer::Impl::repost(Part& p, uint32_t slot) {
  const uint64_t idx = static_cast<uint64_t>(local_[p.id]) * slots_ + slot;
  Status st = recv_any({stage_at(p, slot), p.count * sizeof(float), ps::push_tag(p.id),
                        ps::wr(WrKind::kStage, idx), stage_.mr()});
  if (!st.ok()) fail(st);
}

void PsServer::Impl::dispatch(const Completion& c) {
  if (handle_common(c)) return;
  const WrKind k = ps::wr_kind(c.wr_id);
  const uint64_t idx = ps::wr_index(c.wr_id);
  if (k == WrKind::kStage) {
    Part& p = parts_[idx / slots_];
    const auto slot = static_cast<uint32_t>(idx % slots_);
    const int rank = static_cast<int>(c.peer_id);
    const bool gone = rank >= s_.o.servers && !alive_[static_cast<size_t>(rank - s_.o.servers)];
    if ((c.code != Code::kOk && c.code != Code::kInvalidArgument) || gone) {
      // Its sender failed or was dropped: keep the slot when going on without it.
      if (continuing() && error_.ok()) repost(p, slot);
      return;
    }
    ++pushes_from_[rank];
    ++stats_.pushes;
    if (std::string why = ps::check_push(s_, layout_, p.id, rank, c.code, c.len); !why.empty()) {
      ++stats_.bad_requests;
      (void)send_error(rank, Code::kInvalidArgument, me_ + ": " + why);
      repost(p, slot);
      return;
    }
    stats_.bytes_in += c.len;
    on_push(p, slot, rank - s_.o.servers);
  } else if (k == WrKind::kData) {
    Part& p = parts_[idx];
    --p.inflight;
    if (c.code == Code::kOk) stats_.bytes_out += c.len;
    if (p.inflight == 0) drain(p);
  }
  // kDataErr (empty replies to rejected pulls), late kTable: nothing to do.
}

void PsServer::Impl::on_ctrl(int peer, const CtrlMsg& m, size_t) {
  if (m.type == static_cast<uint8_t>(MsgType::kPull)) {
    on_pull(peer, m);
  } else if (m.type != static_cast<uint8_t>(MsgType::kBye)) {
    ++stats_.bad_requests;
    log_->warn("{}: ignored control message of type {} from {}", me_, m.type, who(peer));
  }
}

void PsServer::Impl::reject_pull(int rank, const CtrlMsg& m, const std::string& why) {
  ++stats_.bad_requests;
  (void)send_error(rank, Code::kInvalidArgument, why, m.slot, m.gen, m.part);
  // An empty reply consumes the receive the worker posted for the data.
  (void)send(rank, {nullptr, 0, ps::pull_tag(m.part & 0xFFFFFF, m.slot, m.gen),
                    ps::wr(WrKind::kDataErr, 0), nullptr});
}

void PsServer::Impl::on_pull(int rank, const CtrlMsg& m) {
  if (rank >= s_.o.servers && !alive_[static_cast<size_t>(rank - s_.o.servers)]) return;
  ++stats_.pulls;
  if (std::string why = ps::check_pull(s_, layout_, local_, rank, m); !why.empty())
    return reject_pull(rank, m, me_ + ": " + why);
  Part& p = parts_[static_cast<size_t>(local_[m.part])];
  Pull q{rank, static_cast<int64_t>(m.clock), m.slot, m.gen};
  if (!blocked(p) && servable(p, q.clock)) {
    serve_pull(p, q);
  } else {
    ++stats_.deferred_pulls;
    p.pulls.push_back(q);
  }
}

// Replies wait while an update is due, so a stream of pulls cannot starve it.
bool PsServer::Impl::blocked(const Part& p) const {
  return p.round_full || (s_.o.mode != Consistency::kBsp && !p.held.empty());
}

bool PsServer::Impl::servable(const Part& p, int64_t clock) const {
  switch (s_.o.mode) {
    case Consistency::kBsp:
      return p.rounds >= clock;
    case Consistency::kSsp:
      return p.min_clock >= clock - s_.o.staleness;
    case Consistency::kAsp:
      return true;
  }
  return true;
}

void PsServer::Impl::serve_pull(Part& p, const Pull& q) {
  const int64_t stale = std::max<int64_t>(0, q.clock - p.min_clock);
  stats_.max_staleness = std::max(stats_.max_staleness, stale);
  ++stats_
        .staleness[std::min<size_t>(static_cast<size_t>(stale), PsServerStats::kStaleBuckets - 1)];
  Status st = send(
      q.rank, {params_.floats() + p.off, p.count * sizeof(float), ps::pull_tag(p.id, q.slot, q.gen),
               ps::wr(WrKind::kData, static_cast<uint64_t>(local_[p.id])), params_.mr()});
  if (st.ok()) ++p.inflight;
}

void PsServer::Impl::serve_pulls(Part& p) {
  // In arrival order; a pull that must wait keeps the later ones behind it only if they are
  // not servable either (clocks differ per worker).
  for (size_t i = 0; i < p.pulls.size();) {
    if (!blocked(p) && servable(p, p.pulls[i].clock)) {
      Pull q = p.pulls[i];
      p.pulls.erase(p.pulls.begin() + static_cast<long>(i));
      serve_pull(p, q);
    } else {
      ++i;
    }
  }
}

void PsServer::Impl::on_push(Part& p, uint32_t slot, int worker) {
  if (s_.o.mode != Consistency::kBsp) {
    if (p.inflight > 0 || !p.held.empty()) {
      p.held.push_back({slot, worker});
    } else {
      apply_async(p, slot, worker);
      serve_pulls(p);
    }
    return;
  }
  // BSP: a push for a later round waits (in its slot) until this round is applied.
  if (p.pushed[static_cast<size_t>(worker)] || p.round_full) {
    p.held.push_back({slot, worker});
    return;
  }
  float* agg = agg_.floats() + p.off;
  const float* g = stage_at(p, slot);
  for (uint64_t i = 0; i < p.count; ++i) agg[i] += g[i];
  repost(p, slot);
  p.pushed[static_cast<size_t>(worker)] = 1;
  ++p.round_pushes;
  if (round_complete(p)) {
    p.round_full = true;
    try_round(p);
  }
}

void PsServer::Impl::try_round(Part& p) {
  if (p.inflight > 0) return;  // replies still read the shard: apply when they are out
  const size_t st = upd_->state_size();
  float* agg = agg_.floats() + p.off;
  upd_->apply({params_.floats() + p.off, p.count}, {state_.floats() + p.off * st, p.count * st},
              {agg, p.count}, p.round_pushes, p.round_pushes, true);
  std::fill(agg, agg + p.count, 0.0f);
  std::fill(p.pushed.begin(), p.pushed.end(), 0);
  p.round_pushes = 0;
  p.round_full = false;
  ++p.rounds;
  ++stats_.rounds;
  std::fill(p.clock.begin(), p.clock.end(), p.rounds);
  p.min_clock = p.rounds;
  std::deque<Held> later;
  later.swap(p.held);
  for (const Held& h : later) on_push(p, h.slot, h.worker);
  serve_pulls(p);
}

void PsServer::Impl::apply_async(Part& p, uint32_t slot, int worker) {
  const size_t st = upd_->state_size();
  upd_->apply({params_.floats() + p.off, p.count}, {state_.floats() + p.off * st, p.count * st},
              {stage_at(p, slot), p.count}, 1, workers_, false);
  repost(p, slot);
  ++p.clock[static_cast<size_t>(worker)];
  update_min_clock(p);
}

// Lost workers' clocks do not hold the others back.
void PsServer::Impl::update_min_clock(Part& p) {
  int64_t m = INT64_MAX;
  for (size_t w = 0; w < p.clock.size(); ++w)
    if (alive_[w]) m = std::min(m, p.clock[w]);
  if (m != INT64_MAX) p.min_clock = m;
}

// BSP: every live worker pushed (a lost one's push counts if it came).
bool PsServer::Impl::round_complete(const Part& p) const {
  if (p.round_pushes == 0) return false;
  for (size_t w = 0; w < p.pushed.size(); ++w)
    if (!p.pushed[w] && alive_[w]) return false;
  return true;
}

bool PsServer::Impl::on_peer_lost(int peer, const Status& why) {
  if (is_server(peer)) {  // servers share nothing: only its BYE is not awaited
    ++stats_.lost_servers;
    log_->warn("{}: {} lost ({}); serving on", me_, who(peer), why.to_string());
    return true;
  }
  const auto w = static_cast<size_t>(peer - s_.o.servers);
  if (!alive_[w]) return true;
  alive_[w] = 0;
  --live_;
  ++stats_.lost_workers;
  log_->warn(
      "{}: {} lost after {} push(es) ({}); going on with {} worker(s): its pushes received "
      "so far count in their rounds",
      me_, who(peer), pushes_from_[static_cast<size_t>(peer)], why.to_string(), live_);
  // The other workers must not wait for its BYE (they may not see it fail themselves).
  CtrlMsg m;
  m.type = static_cast<uint8_t>(MsgType::kLost);
  m.pad = static_cast<uint32_t>(peer) + 1;
  for (int r = s_.o.servers; r < g_.size(); ++r) {
    if (r != peer && alive_[static_cast<size_t>(r - s_.o.servers)] && g_.endpoint(r).status().ok())
      (void)send_ctrl(r, m);
  }
  for (Part& p : parts_) {
    std::erase_if(p.pulls, [&](const Pull& q) { return q.rank == peer; });
    if (s_.o.mode == Consistency::kBsp) {
      if (!p.round_full && round_complete(p)) {
        p.round_full = true;
        try_round(p);
      }
    } else {
      update_min_clock(p);
      if (!blocked(p)) serve_pulls(p);
    }
  }
  return true;
}

void PsServer::Impl::drain(Part& p) {
  if (s_.o.mode == Consistency::kBsp) {
    if (p.round_full) try_round(p);
    return;
  }
  while (!p.held.empty() && p.inflight == 0) {
    Held h = p.held.front();
    p.held.pop_front();
    apply_async(p, h.slot, h.worker);
  }
  serve_pulls(p);
}

bool PsServer::Impl::all_done() const {
  for (int r = s_.o.servers; r < g_.size(); ++r) {
    if (alive_[static_cast<size_t>(r - s_.o.servers)] &&
        (!bye_[r] || pushes_from_[r] < bye_pushes_[r]))
      return false;
  }
  for (const Part& p : parts_) {
    if (p.inflight > 0 || p.round_full || (s_.o.mode != Consistency::kBsp && !p.held.empty()))
      return false;
  }
  return true;
}

Status PsServer::serve(Nanos timeout) {
  Impl& m = *impl_;
  auto d = m.drive();
  Deadline dl(timeout);
  Completion c[64];
  while (!m.all_done()) {
    if (!m.error_.ok()) {
      // Tell the workers why this server stops, before its connections close.
      for (int r = m.s_.o.servers; r < m.g_.size(); ++r) {
        if (m.g_.endpoint(r).status().ok())
          (void)m.send_error(r, m.error_.code(), m.error_.message(), ~0u, 0, 0, m.error_.rank());
      }
      (void)m.say_bye([](int) { return uint64_t{0}; }, Millis(1000), false);
      return m.error_;
    }
    if (dl.expired()) {
      std::string running;
      for (int r = m.s_.o.servers; r < m.g_.size(); ++r) {
        if (m.alive_[static_cast<size_t>(r - m.s_.o.servers)] &&
            (!m.bye_[r] || m.pushes_from_[r] < m.bye_pushes_[r]))
          running += (running.empty() ? "" : ", ") + std::to_string(r);
      }
      return Status(Code::kTimeout, m.me_ + ": still serving after " +
                                        std::to_string(timeout.count() / 1000000) +
                                        " ms; worker rank(s) " + running + " have not finished");
    }
    GW_ASSIGN_OR_RETURN(size_t n, m.next(c, std::min<Nanos>(dl.remaining(), Millis(200))));
    for (size_t i = 0; i < n; ++i) m.dispatch(c[i]);
  }
  for (const Impl::Part& p : m.parts_) {
    if (!p.held.empty()) {
      m.log_->warn(
          "{}: {} push(es) of {} left unapplied: workers finished in different BSP "
          "rounds",
          m.me_, p.held.size(), m.key_desc(p.id));
    }
  }
  return m.say_bye([](int) { return uint64_t{0}; }, m.s_.o.timeout, true);
}

}  // namespace gw
