// PsWorker: setup (key-table handshake with every server), push/pull posting straight from and
// into the caller's buffers, completion handling, finish.
#include <algorithm>

#include "gw_device.h"
#include "log.h"
#include "ps_impl.h"

namespace gw {

using ps::CtrlMsg;
using ps::MsgType;
using ps::WrKind;

struct PsWorker::Impl final : ps::PsPeer {
  struct Req {
    bool used = false, done = false, pull = false, need_reason = false;
    uint32_t gen = 0, key_index = 0;
    int parts_left = 0;
    int64_t clock = 0;
    Status st;
  };

  Impl(Group& g, ps::Settings s, PsLayout l) : PsPeer(g, std::move(s), std::move(l), "worker") {}

  Status setup();
  Status send_table();
  Status await_hellos();
  void drain_byes(Deadline dl);
  void on_ctrl(int peer, const CtrlMsg& m, size_t len) override;
  void dispatch(const Completion& c) override;
  Status check_args(const char* what, uint64_t key, const void* buf, size_t n,
                    const MemoryRegion* mr, uint32_t* ki) const;
  Result<uint32_t> alloc_req(uint32_t ki, bool pull);
  Status pump(Nanos timeout);  // one round of completions
  void complete(Req& r, Status st);
  void fail_all();
  std::string req_desc(const Req& r) const;
  Status peer_error(const Req& r, const Completion& c, const char* dir);
  bool on_peer_lost(int peer, const Status& why) override;
  /// OK, or why key `ki` cannot be used: a server holding part of it was lost.
  const Status* lost_shard(uint32_t ki) const;

  std::vector<Req> reqs_;
  std::vector<uint32_t> free_;
  std::vector<int64_t> clock_;
  std::vector<uint64_t> pushes_to_;
  std::vector<uint8_t> hello_ok_;
  std::vector<Status> server_lost_;  // per server: why its shard is lost
  ps::RegMem table_;
  size_t table_bytes_ = 0;
  int index_ = 0, workers_ = 0;
  bool finished_ = false;
};

Status PsWorker::Impl::setup() {
  index_ = g_.rank() - s_.o.servers;
  workers_ = g_.size() - s_.o.servers;
  reqs_.resize(ps::kMaxRequests);
  for (uint32_t i = ps::kMaxRequests; i-- > 0;) free_.push_back(i);
  clock_.assign(layout_.keys().size(), 0);
  pushes_to_.assign(static_cast<size_t>(g_.size()), 0);
  hello_ok_.assign(static_cast<size_t>(s_.o.servers), 0);
  server_lost_.assign(static_cast<size_t>(s_.o.servers), Status());
  GW_RETURN_IF_ERROR(init_peer());

  GW_RETURN_IF_ERROR(send_table());
  return await_hellos();
}

// Key table and options, checked by every server.
Status PsWorker::Impl::send_table() {
  const auto& keys = layout_.keys();
  table_bytes_ = sizeof(ps::TableHeader) + keys.size() * sizeof(KeySpec);
  GW_RETURN_IF_ERROR(table_.alloc(t_, table_bytes_, "the key table"));
  ps::TableHeader h;
  h.mode = static_cast<uint8_t>(s_.o.mode);
  h.on_loss = static_cast<uint8_t>(s_.o.on_loss);
  h.servers = s_.o.servers;
  h.staleness = s_.o.staleness;
  h.min_part = s_.min_part;
  h.nkeys = keys.size();
  std::memcpy(table_.data(), &h, sizeof h);
  std::memcpy(table_.data() + sizeof h, keys.data(), keys.size() * sizeof(KeySpec));
  for (int srv = 0; srv < s_.o.servers; ++srv) {
    GW_RETURN_IF_ERROR(send(srv, {table_.data(), table_bytes_, ps::tag(ps::TagKind::kTable),
                                  ps::wr(WrKind::kTable, 0), table_.mr()}));
  }
  return Status();
}

// Until every server accepted the table; a rejection or a lost server ends it.
Status PsWorker::Impl::await_hellos() {
  Deadline dl(s_.o.timeout);
  Completion c[32];
  while (std::count(hello_ok_.begin(), hello_ok_.end(), 1) < s_.o.servers) {
    for (const Status& lost : server_lost_)  // every server must take the table
      if (!lost.ok()) return lost;
    if (!error_.ok()) {
      drain_byes(dl);
      return error_;
    }
    if (dl.expired()) {
      std::string missing;
      for (int srv = 0; srv < s_.o.servers; ++srv)
        if (!hello_ok_[srv]) missing += (missing.empty() ? "" : ", ") + std::to_string(srv);
      return Status(Code::kTimeout, me_ + ": server rank(s) " + missing +
                                        " did not accept the key table within " +
                                        std::to_string(s_.o.timeout.count() / 1000000) +
                                        " ms; are they running PsServer::create?");
    }
    GW_ASSIGN_OR_RETURN(size_t n, next(c, dl.remaining()));
    for (size_t i = 0; i < n; ++i) dispatch(c[i]);
  }
  return error_;
}

// A server rejected the table: it says BYE next; take it (bounded) so that nothing is left in
// flight to this rank and the server is not kept waiting for our ack.
void PsWorker::Impl::drain_byes(Deadline dl) {
  Completion c[32];
  Deadline bye(std::min<Nanos>(dl.remaining(), Millis(2000)));
  auto server_bye_due = [&] {
    for (int srv = 0; srv < s_.o.servers; ++srv)
      if (!bye_[srv] && g_.endpoint(srv).status().ok()) return true;
    return false;
  };
  while (server_bye_due() && !bye.expired()) {
    auto n = next(c, bye.remaining());
    if (!n.ok()) break;
    for (size_t i = 0; i < *n; ++i) dispatch(c[i]);
  }
}

std::string PsWorker::Impl::req_desc(const Req& r) const {
  return std::string(r.pull ? "pull" : "push") + " of key " +
         std::to_string(layout_.keys()[r.key_index].key) + " (clock " + std::to_string(r.clock) +
         ")";
}

void PsWorker::Impl::complete(Req& r, Status st) {
  if (r.st.ok()) r.st = std::move(st);
  r.done = true;
}

void PsWorker::Impl::fail_all() {
  for (Req& r : reqs_)
    if (r.used && !r.done) complete(r, error_);
}

void PsWorker::Impl::on_ctrl(int peer, const CtrlMsg& m, size_t) {
  if (m.type == static_cast<uint8_t>(MsgType::kHelloOk)) {
    if (peer < s_.o.servers) hello_ok_[peer] = 1;
    return;
  }
  if (m.type != static_cast<uint8_t>(MsgType::kError)) return;
  auto code = static_cast<Code>(m.code);
  if (code == Code::kOk || m.code > static_cast<uint8_t>(Code::kInternal))
    code = Code::kRemoteError;
  Status st(code, std::string(m.text_view()));
  if (m.slot < reqs_.size() && reqs_[m.slot].used && reqs_[m.slot].gen == m.gen) {
    Req& r = reqs_[m.slot];
    if (r.st.ok()) r.st = st;
    if (r.need_reason && r.parts_left == 0) r.done = true;
    return;
  }
  // Not about a request (key table, a bad push, the server failed): the worker is broken. Its
  // own name first, so that what it reports says which rank reports it.
  Status mine(code, me_ + ": " + std::string(m.text_view()));
  if (m.pad >= 1 && m.pad <= static_cast<uint32_t>(g_.size()))
    mine = mine.with_rank(static_cast<int>(m.pad) - 1);
  fail(std::move(mine));
}

// A request failed with its endpoint: the worker's sticky error if it has one (a server's
// account of what went wrong comes before its connection closes), else the endpoint's.
// A lost server's shard is named (on_loss continue).
Status PsWorker::Impl::peer_error(const Req& r, const Completion& c, const char* dir) {
  const int peer = static_cast<int>(c.peer_id);
  Status ep = c.ep ? c.ep->status() : Status(c.code, "endpoint error");
  if (continuing() && error_.ok() && is_server(peer)) {
    if (!lost_[peer] && on_peer_lost(peer, ep)) lost_[peer] = 1;
    return Status(Code::kRemoteError,
                  me_ + ": " + req_desc(r) + ": " +
                      std::string(server_lost_[static_cast<size_t>(peer)].message()))
        .with_rank(peer);
  }
  if (!error_.ok()) return error_;
  return Status(Code::kRemoteError, me_ + ": " + req_desc(r) + " " + dir + " " + who(peer) +
                                        " failed: " + ep.to_string())
      .with_rank(peer);
}

bool PsWorker::Impl::on_peer_lost(int peer, const Status& why) {
  if (!is_server(peer)) {  // workers share nothing: only its BYE is not awaited
    log_->debug("{}: {} lost ({})", me_, who(peer), why.to_string());
    return true;
  }
  std::string keys;
  size_t n = 0;
  for (uint32_t ki = 0; ki < layout_.keys().size(); ++ki) {
    const uint32_t first = layout_.first_part(ki);
    bool held = false;
    for (uint32_t i = 0; i < layout_.num_parts(ki); ++i)
      held |= layout_.parts()[first + i].server == static_cast<uint32_t>(peer);
    if (!held) continue;
    if (++n <= 16) keys += (keys.empty() ? "" : ", ") + std::to_string(layout_.keys()[ki].key);
  }
  if (n > 16) keys += ", ...";
  server_lost_[static_cast<size_t>(peer)] =
      Status(Code::kRemoteError, who(peer) + " failed (" + why.to_string() + "); its shard of " +
                                     std::to_string(n) + " key(s) is lost: " + keys)
          .with_rank(peer);
  log_->warn("{}: {}", me_, std::string(server_lost_[static_cast<size_t>(peer)].message()));
  return true;
}

const Status* PsWorker::Impl::lost_shard(uint32_t ki) const {
  const uint32_t first = layout_.first_part(ki);
  for (uint32_t i = 0; i < layout_.num_parts(ki); ++i) {
    const Status& st = server_lost_[layout_.parts()[first + i].server];
    if (!st.ok()) return &st;
  }
  return nullptr;
}

void PsWorker::Impl::dispatch(const Completion& c) {
  if (handle_common(c)) return;
  WrKind k = ps::wr_kind(c.wr_id);
  uint64_t idx = ps::wr_index(c.wr_id);
  if (k == WrKind::kPush) {
    Req& r = reqs_[idx];
    if (!r.used) return;
    if (c.code != Code::kOk && r.st.ok()) r.st = peer_error(r, c, "to");
    if (--r.parts_left == 0) r.done = true;
  } else if (k == WrKind::kPull) {
    Req& r = reqs_[idx >> 24];
    auto part = static_cast<uint32_t>(idx & 0xFFFFFF);
    if (!r.used) return;
    const uint64_t want = layout_.parts()[part].count * sizeof(float);
    if (c.code == Code::kInvalidArgument || (c.code == Code::kOk && c.len != want)) {
      // A rejected pull: the server sent its reason (kError) and an empty reply.
      if (c.len != 0 && r.st.ok()) {
        r.st = Status(Code::kProtocolError,
                      me_ + ": " + who(static_cast<int>(c.peer_id)) + " replied " +
                          std::to_string(c.len) + " bytes to the " + req_desc(r) + " for " +
                          key_desc(part) + "; expected " + std::to_string(want));
      }
      r.need_reason = true;
    } else if (c.code != Code::kOk && r.st.ok()) {
      r.st = peer_error(r, c, "from");
    }
    if (--r.parts_left == 0 && (!r.need_reason || !r.st.ok())) r.done = true;
  }
  // kTable sends: a failure also fails the endpoint and is reported there.
}

Status PsWorker::Impl::pump(Nanos timeout) {
  Completion c[64];
  GW_ASSIGN_OR_RETURN(size_t n, next(c, timeout));
  for (size_t i = 0; i < n; ++i) dispatch(c[i]);
  if (!error_.ok()) fail_all();
  return Status();
}

Status PsWorker::Impl::check_args(const char* what, uint64_t key, const void* buf, size_t n,
                                  const MemoryRegion* mr, uint32_t* ki) const {
  if (finished_) return Status(Code::kInvalidArgument, me_ + ": " + what + " after finish()");
  if (!error_.ok()) return error_;
  auto found = layout_.find(key);
  if (!found) {
    return Status(Code::kInvalidArgument,
                  me_ + ": " + what + " of unknown key " + std::to_string(key) + " (" +
                      std::to_string(layout_.keys().size()) + " keys are declared)");
  }
  *ki = *found;
  if (const Status* lost = lost_shard(*ki)) {
    return Status(Code::kRemoteError, me_ + ": " + what + " of key " + std::to_string(key) + ": " +
                                          std::string(lost->message()))
        .with_rank(lost->rank());
  }
  const uint64_t want = layout_.keys()[*ki].count;
  if (n != want) {
    return Status(Code::kInvalidArgument, me_ + ": " + what + " of key " + std::to_string(key) +
                                              " with " + std::to_string(n) + " elements (" +
                                              std::to_string(n * 4) + " bytes); the key has " +
                                              std::to_string(want) + " float32 elements (" +
                                              std::to_string(want * 4) + " bytes)");
  }
  if (buf == nullptr) {
    return Status(Code::kInvalidArgument,
                  me_ + ": " + what + " of key " + std::to_string(key) + " with a null buffer");
  }
  if (mr ? !mr->contains(buf, n * sizeof(float)) : t_.properties().requires_registration) {
    return Status(Code::kInvalidArgument,
                  me_ + ": " + what + " of key " + std::to_string(key) +
                      (mr ? ": the buffer is not inside the given memory region"
                          : ": transport " + t_.properties().name +
                                " needs registered memory (PsWorker::register_memory)"));
  }
  return Status();
}

Result<uint32_t> PsWorker::Impl::alloc_req(uint32_t ki, bool pull) {
  if (free_.empty()) {
    return Status(Code::kResourceExhausted,
                  me_ + ": " + std::to_string(ps::kMaxRequests) +
                      " pushes/pulls in flight; wait() for some before starting more");
  }
  uint32_t slot = free_.back();
  free_.pop_back();
  Req& r = reqs_[slot];
  uint32_t gen = r.gen + 1;
  r = Req{};
  r.used = true;
  r.gen = gen;
  r.key_index = ki;
  r.pull = pull;
  r.parts_left = static_cast<int>(layout_.num_parts(ki));
  r.clock = clock_[ki];
  return slot;
}

// ---- public ------------------------------------------------------------------------------

PsWorker::PsWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PsWorker::~PsWorker() {
  if (!impl_) return;
  impl_->stop_background();
  // A communicator's thread may still serve the transport while the buffers deregister.
  auto d = impl_->drive();
  impl_.reset();
}

Result<std::unique_ptr<PsWorker>> PsWorker::create(Group& group, std::span<const KeySpec> keys,
                                                   const PsOptions& opts) {
  GW_ASSIGN_OR_RETURN(ps::Settings s, ps::settle(group, opts));
  if (group.rank() < s.o.servers) {
    return Status(Code::kInvalidArgument, "ps: rank " + std::to_string(group.rank()) +
                                              " is a server (ranks 0.." +
                                              std::to_string(s.o.servers - 1) + "), not a worker");
  }
  GW_ASSIGN_OR_RETURN(PsLayout layout, PsLayout::make(keys, s.o.servers, s.min_part));
  auto impl = std::make_unique<Impl>(group, std::move(s), std::move(layout));
  GW_RETURN_IF_ERROR(impl->setup());
  GW_RETURN_IF_ERROR(impl->start_background());
  return std::unique_ptr<PsWorker>(new PsWorker(std::move(impl)));
}

Result<MemoryRegion> PsWorker::register_memory(std::span<float> buf) {
  // Device memory is registered as such: the transport moves it or stages it (and says so).
  DriveScope d(impl_->t_.gate());
  return impl_->t_.register_memory(buf.data(), buf.size_bytes(), memory_kind_of(buf.data()));
}

Result<PsHandle> PsWorker::push(uint64_t key, std::span<const float> grad, const MemoryRegion* mr) {
  auto d = impl_->drive();
  Impl& m = *impl_;
  uint32_t ki = 0;
  GW_RETURN_IF_ERROR(m.check_args("push", key, grad.data(), grad.size(), mr, &ki));
  GW_ASSIGN_OR_RETURN(uint32_t slot, m.alloc_req(ki, false));
  const uint32_t first = m.layout_.first_part(ki);
  for (uint32_t i = 0; i < m.layout_.num_parts(ki); ++i) {
    const PsPart& p = m.layout_.parts()[first + i];
    Status st = m.send(static_cast<int>(p.server),
                       {grad.data() + p.offset, p.count * sizeof(float), ps::push_tag(first + i),
                        ps::wr(WrKind::kPush, slot), mr});
    if (!st.ok()) {
      m.fail(st);
      m.reqs_[slot].parts_left = static_cast<int>(i);
      m.complete(m.reqs_[slot], st);
      return st;
    }
    ++m.pushes_to_[p.server];
  }
  ++m.clock_[ki];
  return PsHandle{slot, m.reqs_[slot].gen};
}

Result<PsHandle> PsWorker::pull(uint64_t key, std::span<float> out, const MemoryRegion* mr) {
  auto d = impl_->drive();
  Impl& m = *impl_;
  uint32_t ki = 0;
  GW_RETURN_IF_ERROR(m.check_args("pull", key, out.data(), out.size(), mr, &ki));
  GW_ASSIGN_OR_RETURN(uint32_t slot, m.alloc_req(ki, true));
  const uint32_t gen = m.reqs_[slot].gen;
  const uint32_t first = m.layout_.first_part(ki);
  for (uint32_t i = 0; i < m.layout_.num_parts(ki); ++i) {
    const uint32_t pid = first + i;
    const PsPart& p = m.layout_.parts()[pid];
    const int srv = static_cast<int>(p.server);
    Status st =
        m.recv(srv, {out.data() + p.offset, p.count * sizeof(float), ps::pull_tag(pid, slot, gen),
                     ps::wr(WrKind::kPull, (uint64_t{slot} << 24) | pid), mr});
    if (st.ok()) {
      CtrlMsg c;
      c.type = static_cast<uint8_t>(MsgType::kPull);
      c.part = pid;
      c.slot = slot;
      c.gen = gen;
      c.clock = static_cast<uint64_t>(m.clock_[ki]);
      c.bytes = p.count * sizeof(float);
      st = m.send_ctrl(srv, c);
    }
    if (!st.ok()) {
      m.fail(st);
      m.reqs_[slot].parts_left = static_cast<int>(i);
      m.complete(m.reqs_[slot], st);
      return st;
    }
  }
  return PsHandle{slot, gen};
}

Status PsWorker::wait(PsHandle h, Nanos timeout) {
  auto d = impl_->drive();
  Impl& m = *impl_;
  if (h.slot >= m.reqs_.size() || !m.reqs_[h.slot].used || m.reqs_[h.slot].gen != h.gen) {
    return Status(Code::kInvalidArgument, m.me_ + ": wait on an unknown or finished handle");
  }
  Impl::Req& r = m.reqs_[h.slot];
  Deadline dl(timeout);
  while (!r.done) {
    if (dl.expired()) {
      return Status(Code::kTimeout, m.me_ + ": " + m.req_desc(r) + " not finished within " +
                                        std::to_string(timeout.count() / 1000000) +
                                        " ms (still in flight; wait again)");
    }
    GW_RETURN_IF_ERROR(m.pump(dl.remaining()));
  }
  Status st = r.st;
  r.used = false;
  m.free_.push_back(h.slot);
  return st;
}

Result<bool> PsWorker::test(PsHandle h) {
  auto d = impl_->drive();
  Impl& m = *impl_;
  if (h.slot >= m.reqs_.size() || !m.reqs_[h.slot].used || m.reqs_[h.slot].gen != h.gen) {
    return Status(Code::kInvalidArgument, m.me_ + ": test on an unknown or finished handle");
  }
  if (!m.reqs_[h.slot].done) GW_RETURN_IF_ERROR(m.pump(Nanos(0)));
  return m.reqs_[h.slot].done;
}

Status PsWorker::progress() {
  auto d = impl_->drive();
  Impl& m = *impl_;
  if (m.finished_) return Status(Code::kInvalidArgument, m.me_ + ": progress() after finish()");
  GW_RETURN_IF_ERROR(m.pump(Nanos(0)));
  return m.error_;
}

Status PsWorker::finish(Nanos timeout) {
  auto d = impl_->drive();
  Impl& m = *impl_;
  if (m.finished_) return Status(Code::kInvalidArgument, m.me_ + ": finish() called twice");
  Deadline dl(timeout);
  auto busy = [&] {
    return std::any_of(m.reqs_.begin(), m.reqs_.end(), [](auto& r) { return r.used && !r.done; });
  };
  while (busy()) {
    if (dl.expired()) {
      return Status(Code::kTimeout, m.me_ + ": requests still in flight after " +
                                        std::to_string(timeout.count() / 1000000) + " ms");
    }
    GW_RETURN_IF_ERROR(m.pump(dl.remaining()));
  }
  Status st = m.error_;
  m.finished_ = true;
  Status bye = m.say_bye([&](int r) { return m.pushes_to_[r]; }, dl.remaining(), true);
  return st.ok() ? bye : st;
}

int64_t PsWorker::clock(uint64_t key) const {
  auto ki = impl_->layout_.find(key);
  return ki ? impl_->clock_[*ki] : -1;
}
int PsWorker::worker_index() const { return impl_->index_; }
int PsWorker::workers() const { return impl_->workers_; }
const PsLayout& PsWorker::layout() const { return impl_->layout_; }
Status PsWorker::status() const { return impl_->error_; }

}  // namespace gw
