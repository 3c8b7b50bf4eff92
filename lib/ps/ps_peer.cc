// PsPeer: control messages, posting with back-pressure, finish handshake and failures shared
// by workers and servers; option checks; consistency names.
#include <algorithm>

#include "gw_config.h"
#include "log.h"
#include "ps_impl.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(ps,
               {"ps.timeout_ms", ConfigType::kInt, "60000",
                "parameter server: setup and finish timeout, and how long a full send queue "
                "may block a push or pull"},
               {"ps.min_part_bytes", ConfigType::kInt, "65536",
                "parameter server: keys are cut across servers only into pieces of at least "
                "this size"},
               {"ps.on_loss", ConfigType::kString, "continue",
                "parameter server: a lost worker is dropped and a lost server's keys fail "
                "(continue), or any lost rank fails every rank (fail)"});

}  // namespace

const char* consistency_name(Consistency c) {
  switch (c) {
    case Consistency::kBsp:
      return "bsp";
    case Consistency::kAsp:
      return "asp";
    case Consistency::kSsp:
      return "ssp";
  }
  return "unknown";
}

std::optional<Consistency> parse_consistency(std::string_view name) {
  for (auto c : {Consistency::kBsp, Consistency::kAsp, Consistency::kSsp})
    if (name == consistency_name(c)) return c;
  return std::nullopt;
}

namespace ps {

Result<Settings> settle(const Group& g, const PsOptions& opts) {
  Settings s{opts, 0};
  if (opts.servers < 1 || opts.servers >= g.size()) {
    return Status(Code::kInvalidArgument, "ps: " + std::to_string(opts.servers) +
                                              " servers in a group of " + std::to_string(g.size()) +
                                              " ranks; need 1 <= servers < ranks (at least "
                                              "one worker)");
  }
  if (opts.staleness < 0) {
    return Status(Code::kInvalidArgument,
                  "ps: staleness " + std::to_string(opts.staleness) + " must be >= 0");
  }
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  if (s.o.timeout.count() <= 0) {
    GW_ASSIGN_OR_RETURN(int64_t ms, cfg.get_int("ps.timeout_ms"));
    s.o.timeout = Millis(std::max<int64_t>(1, ms));
  }
  if (s.o.min_part_bytes <= 0) {
    GW_ASSIGN_OR_RETURN(s.o.min_part_bytes, cfg.get_int("ps.min_part_bytes"));
  }
  s.min_part = static_cast<uint64_t>(std::max<int64_t>(4, s.o.min_part_bytes)) / sizeof(float);
  if (s.o.on_loss == PsOnLoss::kConfig) {
    GW_ASSIGN_OR_RETURN(std::string v, cfg.get_string("ps.on_loss"));
    if (v != "continue" && v != "fail") {
      return Status(Code::kInvalidArgument, "ps: ps.on_loss = \"" + v + "\" (" +
                                                cfg.origin_of("ps.on_loss") +
                                                "); use \"continue\" or \"fail\"");
    }
    s.o.on_loss = v == "fail" ? PsOnLoss::kFail : PsOnLoss::kContinue;
  }
  if (s.o.on_loss != PsOnLoss::kContinue && s.o.on_loss != PsOnLoss::kFail) {
    return Status(Code::kInvalidArgument, "ps: unknown PsOptions::on_loss " +
                                              std::to_string(static_cast<int>(s.o.on_loss)));
  }
  return s;
}

Status RegMem::alloc(Transport& t, size_t bytes, const char* what) {
  DriveScope d(t.gate());
  size_t cap = (std::max<size_t>(bytes, 64) + 4095) / 4096 * 4096;
  mr_ = MemoryRegion();
  mem_.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, cap)));
  if (!mem_) {
    return Status(Code::kResourceExhausted,
                  "ps: cannot allocate " + std::to_string(cap) + " bytes for " + what);
  }
  std::memset(mem_.get(), 0, cap);
  auto mr = t.register_memory(mem_.get(), cap, MemKind::kHost);
  if (!mr.ok()) return mr.status().with_context(std::string("ps: registering ") + what);
  mr_ = std::move(*mr);
  return Status();
}

PsPeer::PsPeer(Group& g, Settings s, PsLayout layout, const char* role)
    : g_(g),
      t_(g.transport()),
      s_(std::move(s)),
      layout_(std::move(layout)),
      log_(log::get("gw.ps")),
      me_(std::string("ps ") + role + " rank " + std::to_string(g.rank())),
      bye_(static_cast<size_t>(g.size()), 0),
      lost_(static_cast<size_t>(g.size()), 0),
      bye_pushes_(static_cast<size_t>(g.size()), 0) {}

std::string who(int servers, int rank) {
  return std::string(rank < servers ? "server" : "worker") + " rank " + std::to_string(rank);
}

std::string key_desc(const PsLayout& layout, uint32_t part) {
  const PsPart& p = layout.parts()[part];
  return "key " + std::to_string(layout.keys()[p.key_index].key) + " elements [" +
         std::to_string(p.offset) + ", " + std::to_string(p.offset + p.count) + ")";
}

std::string PsPeer::who(int rank) const { return ps::who(s_.o.servers, rank); }

std::string PsPeer::key_desc(uint32_t part) const { return ps::key_desc(layout_, part); }

Status PsPeer::init_peer() {
  GW_RETURN_IF_ERROR(ctrl_rx_.alloc(t_, kCtrlRecvs * sizeof(CtrlMsg), "control receives"));
  GW_RETURN_IF_ERROR(ctrl_tx_.alloc(t_, kCtrlSends * sizeof(CtrlMsg), "control sends"));
  for (uint32_t i = kCtrlSends; i-- > 0;) free_tx_.push_back(i);
  for (uint32_t i = 0; i < kCtrlRecvs; ++i) GW_RETURN_IF_ERROR(repost_ctrl(i));
  return Status();
}

Status PsPeer::repost_ctrl(uint64_t idx) {
  return recv_any({ctrl_rx_.data() + idx * sizeof(CtrlMsg), sizeof(CtrlMsg), tag(TagKind::kCtrl),
                   wr(WrKind::kCtrlRecv, idx), ctrl_rx_.mr()});
}

Result<size_t> PsPeer::next(std::span<Completion> out, Nanos timeout) {
  if (!backlog_.empty()) {
    size_t n = 0;
    while (n < out.size() && !backlog_.empty()) {
      out[n++] = backlog_.front();
      backlog_.pop_front();
    }
    return n;
  }
  DriveScope d(t_.gate());  // a communicator's progress thread may share the transport
  auto got = t_.cq().wait(out, timeout);
  if (!got.ok() && got.status().code() == Code::kTimeout) return size_t{0};
  return got;
}

Status PsPeer::post_retry(const std::function<Result<size_t>()>& post, const char* what, int peer) {
  DriveScope d(t_.gate());
  Deadline dl(s_.o.timeout);
  for (;;) {
    GW_ASSIGN_OR_RETURN(size_t n, post());
    if (n == 1) return Status();
    // Queue full: make progress; what completes is handled later from the backlog.
    Completion c[32];
    auto got = t_.cq().wait(c, std::min<Nanos>(dl.remaining(), Millis(10)));
    if (got.ok()) backlog_.insert(backlog_.end(), c, c + *got);
    if (dl.expired()) {
      return Status(Code::kTimeout, me_ + ": the " + what + " queue to " +
                                        (peer >= 0 ? who(peer) : std::string("any peer")) +
                                        " stayed full for " +
                                        std::to_string(s_.o.timeout.count() / 1000000) + " ms");
    }
  }
}

Status PsPeer::send(int peer, const SendRequest& r) {
  Endpoint& ep = g_.endpoint(peer);
  return post_retry([&] { return ep.post_send({&r, 1}); }, "send", peer);
}

Status PsPeer::recv(int peer, const RecvRequest& r) {
  Endpoint& ep = g_.endpoint(peer);
  return post_retry([&] { return ep.post_recv({&r, 1}); }, "receive", peer);
}

Status PsPeer::recv_any(const RecvRequest& r) {
  return post_retry([&] { return t_.post_recv_any({&r, 1}); }, "any-source receive", -1);
}

Status PsPeer::send_ctrl(int peer, const CtrlMsg& m) {
  if (free_tx_.empty()) {
    return Status(Code::kResourceExhausted,
                  me_ + ": " + std::to_string(kCtrlSends) + " control messages in flight");
  }
  uint32_t i = free_tx_.back();
  free_tx_.pop_back();
  auto* buf = ctrl_tx_.data() + size_t{i} * sizeof(CtrlMsg);
  std::memcpy(buf, &m, sizeof m);
  Status st =
      send(peer, {buf, sizeof m, tag(TagKind::kCtrl), wr(WrKind::kCtrlSend, i), ctrl_tx_.mr()});
  if (!st.ok()) free_tx_.push_back(i);
  return st;
}

Status PsPeer::send_error(int peer, Code code, std::string_view text, uint32_t slot, uint32_t gen,
                          uint32_t part, int culprit) {
  CtrlMsg m;
  m.pad = static_cast<uint32_t>(culprit + 1);
  m.type = static_cast<uint8_t>(MsgType::kError);
  m.code = static_cast<uint8_t>(code);
  m.slot = slot;
  m.gen = gen;
  m.part = part;
  m.set_text(text);
  return send_ctrl(peer, m);
}

bool PsPeer::handle_common(const Completion& c) {
  if (c.op == Op::kEndpointError) {
    on_endpoint_error(c);
    return true;
  }
  WrKind k = wr_kind(c.wr_id);
  if (k == WrKind::kCtrlSend) {
    free_tx_.push_back(static_cast<uint32_t>(wr_index(c.wr_id)));
    return true;  // a failed send also fails the endpoint: reported there
  }
  if (k != WrKind::kCtrlRecv) return false;
  if (c.code != Code::kOk) {
    if (c.code == Code::kInvalidArgument)  // too long: not one of ours
      log_->warn("{}: dropped a {}-byte control message from {}", me_, c.len, who(c.peer_id));
    // Its sender failed: keep the receive when going on without it.
    if (c.code == Code::kInvalidArgument || (continuing() && error_.ok()))
      (void)repost_ctrl(wr_index(c.wr_id));
    return true;
  }
  const auto* m =
      reinterpret_cast<const CtrlMsg*>(ctrl_rx_.data() + wr_index(c.wr_id) * sizeof(CtrlMsg));
  if (!ctrl_ok(*m, c.len)) {
    log_->warn("{}: dropped a malformed control message ({} bytes) from {}", me_, c.len,
               who(c.peer_id));
  } else {
    if (m->type == static_cast<uint8_t>(MsgType::kBye)) {
      bye_[c.peer_id] = 1;
      bye_pushes_[c.peer_id] = m->bytes;
    }
    if (m->type == static_cast<uint8_t>(MsgType::kLost)) {  // only a server drops workers
      if (is_server(static_cast<int>(c.peer_id)) && m->pad > static_cast<uint32_t>(s_.o.servers) &&
          m->pad <= static_cast<uint32_t>(g_.size()))
        lost_[m->pad - 1] = 1;
    } else if (m->type == static_cast<uint8_t>(MsgType::kFailed)) {
      // A peer's account of a failure comes before its connection closes: it, not the
      // close, names the culprit here.
      const int culprit = m->pad >= 1 && m->pad <= static_cast<uint32_t>(g_.size())
                              ? static_cast<int>(m->pad) - 1
                              : static_cast<int>(c.peer_id);
      fail(Status(Code::kRemoteError, me_ + ": told by " + who(static_cast<int>(c.peer_id)) + ": " +
                                          std::string(m->text_view()))
               .with_rank(culprit));
    } else {
      on_ctrl(static_cast<int>(c.peer_id), *m, c.len);
    }
  }
  Status st = repost_ctrl(wr_index(c.wr_id));
  if (!st.ok()) fail(st);
  return true;
}

void PsPeer::on_endpoint_error(const Completion& c) {
  if (bye_[c.peer_id]) return;  // it finished; closing its connection is no failure
  Status ep = c.ep ? c.ep->status() : Status(c.code, "endpoint failed");
  if (lost_[c.peer_id]) return;
  if (continuing() && error_.ok() && on_peer_lost(static_cast<int>(c.peer_id), ep)) {
    lost_[c.peer_id] = 1;
    return;
  }
  const bool first = error_.ok();
  const int culprit = ep.rank() >= 0 ? ep.rank() : static_cast<int>(c.peer_id);
  fail(Status(Code::kRemoteError, me_ + ": " + who(static_cast<int>(c.peer_id)) +
                                      " failed before finishing: " + ep.to_string())
           .with_rank(culprit));
  if (!first) return;
  // Tell every other rank before this one gives up and closes its connections.
  CtrlMsg m;
  m.type = static_cast<uint8_t>(MsgType::kFailed);
  m.pad = static_cast<uint32_t>(culprit) + 1;
  m.set_text(who(culprit) + " failed: " + ep.to_string());
  for (int r = 0; r < g_.size(); ++r) {
    if (r != g_.rank() && r != static_cast<int>(c.peer_id) && !bye_[r] &&
        g_.endpoint(r).status().ok())
      (void)send_ctrl(r, m);
  }
}

Status PsPeer::start_background() {
  GW_RETURN_IF_ERROR(t_.start_background());
  background_ = t_.background();
  return Status();
}

void PsPeer::stop_background() {
  if (background_) t_.stop_background();
  background_ = false;
}

void PsPeer::fail(Status st) {
  if (!error_.ok() || st.ok()) return;
  log_->warn("{}", st.to_string());
  error_ = std::move(st);
}

Status PsPeer::say_bye(const std::function<uint64_t(int)>& pushes_to, Nanos timeout,
                       bool await_peers) {
  DriveScope d(t_.gate());
  for (int r = 0; r < g_.size(); ++r) {
    if (r == g_.rank() || !g_.endpoint(r).status().ok()) continue;
    CtrlMsg m;
    m.type = static_cast<uint8_t>(MsgType::kBye);
    m.bytes = pushes_to(r);
    (void)send_ctrl(r, m);  // a peer already gone is fine
  }
  auto waiting_for = [&] {
    std::string ranks;
    for (int r = 0; await_peers && r < g_.size(); ++r) {
      if (r != g_.rank() && !bye_[r] && !lost_[r] && g_.endpoint(r).status().ok())
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    return ranks;
  };
  Deadline dl(timeout);
  Completion c[32];
  while (free_tx_.size() < kCtrlSends || !waiting_for().empty()) {
    if (await_peers && !error_.ok()) return error_;
    if (dl.expired()) {
      const std::string ranks = waiting_for();
      return Status(Code::kTimeout, me_ + ": " +
                                        (ranks.empty() ? std::string("finishing messages not sent")
                                                       : "rank(s) " + ranks + " did not finish") +
                                        " within " + std::to_string(timeout.count() / 1000000) +
                                        " ms");
    }
    GW_ASSIGN_OR_RETURN(size_t n, next(c, dl.remaining()));
    for (size_t i = 0; i < n; ++i) dispatch(c[i]);
  }
  return Status();
}

}  // namespace ps
}  // namespace gw
