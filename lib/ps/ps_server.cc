// PsServer setup: shards and staging buffers, initial values, the key-table check with every
// worker; the public calls.
#include <algorithm>
#include <cstdint>

#include "log.h"
#include "ps_server.h"

namespace gw {

using ps::CtrlMsg;
using ps::MsgType;
using ps::WrKind;

uint64_t PsServer::Impl::take_parts() {
  local_.assign(layout_.parts().size(), -1);
  uint64_t elems = 0;
  for (uint32_t id = 0; id < layout_.parts().size(); ++id) {
    const PsPart& lp = layout_.parts()[id];
    if (lp.server != static_cast<uint32_t>(g_.rank())) continue;
    local_[id] = static_cast<int32_t>(parts_.size());
    Part p;
    p.id = id;
    p.off = elems;
    p.count = lp.count;
    p.clock.assign(static_cast<size_t>(workers_), 0);
    p.pushed.assign(static_cast<size_t>(workers_), 0);
    parts_.push_back(std::move(p));
    elems += lp.count;
  }
  return elems;
}

Status PsServer::Impl::size_slots() {
  // Staging: one slot per worker and part where the transport can hold that many posted
  // any-source receives; fewer (down to 1) otherwise: extra pushes then wait in the driver.
  const size_t max_any =
      t_.properties().max_outstanding ? t_.properties().max_outstanding : size_t{1} << 20;
  const size_t fixed = 64 + static_cast<size_t>(workers_) + 16;
  if (!parts_.empty() && max_any < fixed + parts_.size()) {
    return Status(Code::kResourceExhausted,
                  me_ + ": holds " + std::to_string(parts_.size()) +
                      " parts but the transport takes only " + std::to_string(max_any) +
                      " posted receives; use fewer, larger keys or more servers");
  }
  slots_ = static_cast<uint32_t>(
      std::clamp<size_t>(parts_.empty() ? 1 : (max_any - fixed) / parts_.size(), 1,
                         std::min<size_t>(static_cast<size_t>(workers_), 4096)));
  for (Part& p : parts_) p.stage_off = p.off * slots_;
  return Status();
}

Status PsServer::Impl::setup(const PsInit& init) {
  workers_ = g_.size() - s_.o.servers;
  live_ = workers_;
  alive_.assign(static_cast<size_t>(workers_), 1);
  pushes_from_.assign(static_cast<size_t>(g_.size()), 0);
  uint64_t elems = take_parts();
  GW_RETURN_IF_ERROR(size_slots());

  const size_t bytes = std::max<uint64_t>(elems, 1) * sizeof(float);
  GW_RETURN_IF_ERROR(params_.alloc(t_, bytes, "parameters"));
  GW_RETURN_IF_ERROR(
      state_.alloc(t_, bytes * std::max<size_t>(upd_->state_size(), 1), "optimizer state"));
  if (s_.o.mode == Consistency::kBsp) GW_RETURN_IF_ERROR(agg_.alloc(t_, bytes, "round sums"));
  GW_RETURN_IF_ERROR(stage_.alloc(t_, bytes * slots_, "push staging"));
  for (Part& p : parts_) {
    const PsPart& lp = layout_.parts()[p.id];
    if (init)
      init(layout_.keys()[lp.key_index].key, lp.offset, {params_.floats() + p.off, p.count});
  }
  log_->debug("{}: {} parts, {} elements, {} staging slot(s) per part, mode {}, updater {}", me_,
              parts_.size(), elems, slots_, consistency_name(s_.o.mode), upd_->name());

  GW_RETURN_IF_ERROR(init_peer());
  table_cap_ = sizeof(ps::TableHeader) + layout_.keys().size() * sizeof(KeySpec) + 16;
  GW_RETURN_IF_ERROR(
      table_rx_.alloc(t_, table_cap_ * static_cast<size_t>(workers_), "key-table receives"));
  for (int w = 0; w < workers_; ++w) {
    GW_RETURN_IF_ERROR(
        recv_any({table_rx_.data() + table_cap_ * static_cast<size_t>(w), table_cap_,
                  ps::tag(ps::TagKind::kTable), ps::wr(WrKind::kTable, static_cast<uint64_t>(w)),
                  table_rx_.mr()}));
  }
  for (Part& p : parts_)
    for (uint32_t s = 0; s < slots_; ++s) repost(p, s);
  GW_RETURN_IF_ERROR(error_);
  return check_tables();
}

std::string ps::check_table(const Settings& s, const PsLayout& layout, const uint8_t* p,
                            size_t len) {
  ps::TableHeader h;
  if (len < sizeof h) return std::to_string(len) + " bytes is too short";
  std::memcpy(&h, p, sizeof h);
  if (h.magic != ps::kMagic) return "bad magic (not a gradwire PS worker?)";
  if (h.on_loss != static_cast<uint8_t>(s.o.on_loss)) {
    return std::string("options differ: worker has on_loss ") +
           (h.on_loss == static_cast<uint8_t>(PsOnLoss::kFail) ? "fail" : "continue") +
           ", server has " + (s.o.on_loss == PsOnLoss::kFail ? "fail" : "continue");
  }
  if (h.mode != static_cast<uint8_t>(s.o.mode) || h.servers != s.o.servers ||
      (s.o.mode == Consistency::kSsp && h.staleness != s.o.staleness) || h.min_part != s.min_part) {
    return std::string("options differ: worker has mode ") +
           consistency_name(static_cast<Consistency>(h.mode % 3)) + ", servers " +
           std::to_string(h.servers) + ", staleness " + std::to_string(h.staleness) +
           ", min part " + std::to_string(h.min_part) + " elements; server has " +
           consistency_name(s.o.mode) + ", " + std::to_string(s.o.servers) + ", " +
           std::to_string(s.o.staleness) + ", " + std::to_string(s.min_part);
  }
  // The count first: nkeys * 16 wraps for a huge count, which could then match len.
  if (h.nkeys > (len - sizeof h) / sizeof(KeySpec) || len != sizeof h + h.nkeys * sizeof(KeySpec)) {
    return "table of " + std::to_string(len) + " bytes does not hold the " +
           std::to_string(h.nkeys) + " keys it announces";
  }
  std::vector<uint8_t> seen(layout.keys().size(), 0);
  for (uint64_t i = 0; i < h.nkeys; ++i) {
    KeySpec k;
    std::memcpy(&k, p + sizeof h + i * sizeof k, sizeof k);
    auto ki = layout.find(k.key);
    if (!ki) {
      return "key " + std::to_string(k.key) + " (" + std::to_string(k.count) +
             " elements) is unknown to the server (" + std::to_string(layout.keys().size()) +
             " keys declared there)";
    }
    if (layout.keys()[*ki].count != k.count) {
      return "key " + std::to_string(k.key) + " has " + std::to_string(k.count) + " elements (" +
             std::to_string(k.count * 4) + " bytes) on the worker but " +
             std::to_string(layout.keys()[*ki].count) + " (" +
             std::to_string(layout.keys()[*ki].count * 4) + " bytes) on the server";
    }
    seen[*ki] = 1;
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return "key " + std::to_string(layout.keys()[i].key) + " (" +
             std::to_string(layout.keys()[i].count) + " elements) is missing on the worker";
    }
  }
  return {};
}

std::string ps::check_pull(const Settings& s, const PsLayout& layout,
                           std::span<const int32_t> local, int rank, const CtrlMsg& m) {
  if (rank < s.o.servers) return "pull from a server rank";
  if (m.part >= local.size() || local[m.part] < 0) {
    return "pull of part " + std::to_string(m.part) + " from " + who(s.o.servers, rank) +
           (m.part < local.size()
                ? " (" + key_desc(layout, m.part) + ") which this server does not hold"
                : " which does not exist (the layout has " + std::to_string(local.size()) +
                      " parts)");
  }
  const uint64_t count = layout.parts()[m.part].count;
  if (m.bytes != count * sizeof(float)) {
    return "pull of " + key_desc(layout, m.part) + " from " + who(s.o.servers, rank) +
           " asks for " + std::to_string(m.bytes) + " bytes; the part has " +
           std::to_string(count * sizeof(float)) + " (" + std::to_string(count) + " float32)";
  }
  // The server compares clocks as int64 (clock - staleness, clock - the part's clock): a
  // clock past INT64_MAX would overflow there (found writing fuzz_ps_msgs_core).
  if (m.clock > static_cast<uint64_t>(INT64_MAX)) {
    return "pull of " + key_desc(layout, m.part) + " from " + who(s.o.servers, rank) +
           " at clock " + std::to_string(m.clock) + ", more than a worker can count";
  }
  return {};
}

std::string ps::check_push(const Settings& s, const PsLayout& layout, uint32_t part, int rank,
                           Code code, size_t len) {
  const uint64_t count = layout.parts()[part].count, want = count * sizeof(float);
  if (code == Code::kOk && len == want && rank >= s.o.servers) return {};
  return "push of " + key_desc(layout, part) + " from " + who(s.o.servers, rank) + " has " +
         std::to_string(len) + " bytes; the server expects " + std::to_string(want) + " (" +
         std::to_string(count) + " float32)";
}

std::string PsServer::Impl::check_table(int rank, const uint8_t* p, size_t len) const {
  std::string why = ps::check_table(s_, layout_, p, len);
  return why.empty() ? why : me_ + " rejects the key table of " + who(rank) + ": " + why;
}

Status PsServer::Impl::check_tables() {
  Deadline dl(s_.o.timeout);
  std::vector<uint8_t> got(static_cast<size_t>(g_.size()), 0);
  Completion c[32];
  // A worker lost meanwhile (on_loss continue) is not waited for.
  auto pending = [&] {
    for (int r = s_.o.servers; r < g_.size(); ++r)
      if (!got[r] && alive_[static_cast<size_t>(r - s_.o.servers)]) return true;
    return false;
  };
  while (pending()) {
    if (!error_.ok()) return error_;
    if (dl.expired()) {
      std::string missing;
      for (int r = s_.o.servers; r < g_.size(); ++r)
        if (!got[r] && alive_[static_cast<size_t>(r - s_.o.servers)])
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      return Status(Code::kTimeout, me_ + ": no key table from worker rank(s) " + missing +
                                        " within " +
                                        std::to_string(s_.o.timeout.count() / 1000000) +
                                        " ms; are they running PsWorker::create?");
    }
    GW_ASSIGN_OR_RETURN(size_t n, next(c, dl.remaining()));
    for (size_t i = 0; i < n; ++i) {
      if (ps::wr_kind(c[i].wr_id) != WrKind::kTable || c[i].op != Op::kRecv) {
        dispatch(c[i]);
        continue;
      }
      const int r = static_cast<int>(c[i].peer_id);
      if (c[i].code != Code::kOk && c[i].code != Code::kInvalidArgument) continue;
      std::string why;
      if (is_server(r) || got[r]) {
        why = me_ + ": unexpected key table from " + who(r);
      } else if (c[i].code == Code::kInvalidArgument) {
        why = me_ + " rejects the key table of " + who(r) + ": " + std::to_string(c[i].len) +
              " bytes, more than the server's " + std::to_string(layout_.keys().size()) +
              " keys take (" + std::to_string(table_cap_ - 16) + " bytes)";
      } else {
        why = check_table(r, table_rx_.data() + table_cap_ * ps::wr_index(c[i].wr_id), c[i].len);
      }
      if (!is_server(r)) got[r] = 1;
      if (why.empty()) continue;
      // Tell every worker (the culprit last, as it will exit) and give up.
      for (int q = s_.o.servers; q < g_.size(); ++q)
        if (q != r) (void)send_error(q, Code::kInvalidArgument, why);
      (void)send_error(r, Code::kInvalidArgument, why);
      // Let the replies leave before the caller tears the group down.
      (void)say_bye([](int) { return uint64_t{0}; }, std::min<Nanos>(dl.remaining(), Millis(2000)),
                    false);
      return Status(Code::kInvalidArgument, why);
    }
  }
  CtrlMsg ok;
  ok.type = static_cast<uint8_t>(MsgType::kHelloOk);
  for (int r = s_.o.servers; r < g_.size(); ++r)
    if (alive_[static_cast<size_t>(r - s_.o.servers)]) GW_RETURN_IF_ERROR(send_ctrl(r, ok));
  return Status();
}

// ---- public ------------------------------------------------------------------------------

PsServer::PsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsServer::~PsServer() {
  if (!impl_) return;
  impl_->stop_background();
  // A communicator's thread may still serve the transport while the buffers deregister.
  auto d = impl_->drive();
  impl_.reset();
}

Result<std::unique_ptr<PsServer>> PsServer::create(Group& group, std::span<const KeySpec> keys,
                                                   const PsOptions& opts,
                                                   std::unique_ptr<Updater> updater, PsInit init) {
  GW_ASSIGN_OR_RETURN(ps::Settings s, ps::settle(group, opts));
  if (group.rank() >= s.o.servers) {
    return Status(Code::kInvalidArgument, "ps: rank " + std::to_string(group.rank()) +
                                              " is a worker (servers are ranks 0.." +
                                              std::to_string(s.o.servers - 1) + ")");
  }
  if (!updater) return Status(Code::kInvalidArgument, "ps: PsServer::create needs an updater");
  GW_ASSIGN_OR_RETURN(PsLayout layout, PsLayout::make(keys, s.o.servers, s.min_part));
  auto impl = std::make_unique<Impl>(group, std::move(s), std::move(layout), std::move(updater));
  GW_RETURN_IF_ERROR(impl->setup(init));
  GW_RETURN_IF_ERROR(impl->start_background());
  return std::unique_ptr<PsServer>(new PsServer(std::move(impl)));
}

const PsServerStats& PsServer::stats() const { return impl_->stats_; }
int PsServer::live_workers() const { return impl_->live_; }
const PsLayout& PsServer::layout() const { return impl_->layout_; }

Result<std::span<const float>> PsServer::part_values(uint32_t part) const {
  if (part >= impl_->local_.size() || impl_->local_[part] < 0) {
    return Status(Code::kInvalidArgument,
                  impl_->me_ + " does not hold part " + std::to_string(part));
  }
  const Impl::Part& p = impl_->parts_[static_cast<size_t>(impl_->local_[part])];
  return std::span<const float>(impl_->params_.floats() + p.off, p.count);
}

}  // namespace gw
