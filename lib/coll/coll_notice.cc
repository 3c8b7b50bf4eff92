// Failure notices, abort and the timeout's search for the stopped rank (coll_notice.h), and
// the communicator's error paths that use them: fail_all, check_deadlines.
#include "coll_notice.h"

#include <algorithm>
#include <cstring>

#include "log.h"

namespace gw {
namespace {

using coll::Notice;
using coll::Notices;
using coll::Task;

constexpr uint64_t kNoticeMagic = 0xC3;  // coll: 0xC0, point-to-point: 0xC1
constexpr uint32_t kNoticeSlot = 0xFE;   // wr_id slot of notices (no Task has it)
constexpr Nanos kFlush = Millis(200);    // a failing rank waits this for its notices
std::atomic<uint32_t> g_instance{0};     // tells a communicator's notices from an earlier one's

std::string ranks_text(uint64_t mask) {
  std::string s;
  for (int r = 0; r < 64; ++r) {
    if (!(mask >> r & 1)) continue;
    s += s.empty() ? "rank " : ", ";
    s += std::to_string(r);
  }
  return s.empty() ? "no rank" : s;
}

int lowest(uint64_t mask) {
  for (int r = 0; r < 64; ++r)
    if (mask >> r & 1) return r;
  return -1;
}

// Grace period of the timeout phase: long enough for every survivor's report to arrive (their
// deadlines differ by the skew of their starts), short beside the timeout itself.
// How long a peer's failure waits for a notice naming its origin: a notice sent as the
// origin failed is on the wire by then (loopback and LAN round trips are far shorter).
constexpr Nanos kSettle = Millis(50);

Nanos grace(Nanos timeout) { return std::clamp<Nanos>(timeout / 4, Millis(100), Millis(500)); }

}  // namespace

namespace coll {

// Notices of a destroyed communicator whose receives are still posted (the transport cannot
// take them back): kept, so a late notice lands in memory that is still there. Locked: ranks
// of one process (threads) destroy their communicators at the same time.
static void park(std::unique_ptr<Notices> nt) {
  static std::mutex mu;
  static auto* v = new std::vector<std::unique_ptr<Notices>>();
  std::lock_guard<std::mutex> l(mu);
  v->push_back(std::move(nt));
}

static bool post_notice_recv(Communicator::Impl& im, int i) {
  Notices& nt = *im.faults.notices;
  RecvRequest r{nt.slot(i), sizeof(Notice), coll::make_tag(kNoticeMagic, im.epoch, 0, 0),
                make_wr(kNoticeSlot, im.faults.notice_id, false, static_cast<uint32_t>(i)),
                im.needs_mr ? nt.buf.mr() : nullptr};
  auto k = im.group.transport().post_recv_any({&r, 1});
  if (!k.ok() || *k != 1) return false;
  ++nt.posted;
  return true;
}

Status notices_init(Communicator::Impl& im) {
  im.faults.notices = std::make_unique<Notices>();
  im.faults.notice_id = g_instance.fetch_add(1, std::memory_order_relaxed) & 0xFFFFFF;
  Notices& nt = *im.faults.notices;
  nt.pend_from.assign(static_cast<size_t>(im.n), 0);
  nt.pend_to.assign(static_cast<size_t>(im.n), 0);
  if (im.n == 1) return Status();
  GW_RETURN_IF_ERROR(nt.buf.ensure(im.group.transport(), (Notices::kRecvs + 2) * sizeof(Notice)));
  std::memset(nt.buf.data(), 0, (Notices::kRecvs + 2) * sizeof(Notice));
  for (int i = 0; i < Notices::kRecvs; ++i) {
    if (!post_notice_recv(im, i)) {
      log::get("gw.coll")->debug("coll: rank {}: {} failure-notice receives posted", im.rank, i);
      break;
    }
  }
  return Status();
}

// What a notice tells the rank that receives it.
static Status notice_status(const Communicator::Impl& im, const Notice& m) {
  const std::string text(m.text, strnlen(m.text, sizeof(m.text)));
  const std::string me = " (rank " + std::to_string(im.rank) + " of " + std::to_string(im.n) + ")";
  const Code code = m.code > 0 && m.code <= static_cast<uint8_t>(Code::kAborted)
                        ? static_cast<Code>(m.code)
                        : Code::kRemoteError;
  if (code == Code::kAborted) return Status(code, text + me).with_rank(m.culprit);
  std::string head = "coll: ";
  if (m.culprit >= 0 && m.culprit != m.sender) {
    head += "rank " + std::to_string(m.culprit) + " failed, as rank " + std::to_string(m.sender) +
            " found";
  } else {
    head += "rank " + std::to_string(m.sender) + " failed";
  }
  return Status(code, head + me + ": " + text).with_rank(m.culprit);
}

bool notices_on_completion(Communicator::Impl& im, const Completion& c) {
  Notices& nt = *im.faults.notices;
  const uint32_t slot = static_cast<uint32_t>(c.wr_id >> 56);
  const bool is_send = (c.wr_id >> 31) & 1;
  if (slot != kNoticeSlot) {  // a collective's or a send/receive's: count it per peer
    if (c.op != Op::kEndpointError && c.ep && c.peer_id < nt.pend_from.size()) {
      uint32_t& p = (is_send ? nt.pend_to : nt.pend_from)[c.peer_id];
      if (p) --p;
    }
    return false;
  }
  if (((c.wr_id >> 32) & 0xFFFFFF) != im.faults.notice_id)
    return true;  // an earlier communicator's
  if (is_send) {
    if (nt.sends_pending) --nt.sends_pending;
    return true;
  }
  --nt.posted;
  const int i = static_cast<int>(c.wr_id & 0x7FFFFFFF);
  if (c.code != Code::kOk || i >= Notices::kRecvs) return true;
  Notice m;
  std::memcpy(&m, nt.slot(i), sizeof(m));
  if (c.len != sizeof(Notice) || m.magic != Notice::kMagic || m.sender < 0 || m.sender >= im.n) {
    (void)post_notice_recv(im, i);
    return true;
  }
  if (!im.broken.ok()) return true;  // the first error stands
  if (m.kind == Notice::kReport) {
    nt.reported |= m.sender < 64 ? uint64_t{1} << m.sender : 0;
    nt.waited |= m.waiting;
    (void)post_notice_recv(im, i);
    if (!nt.suspect) im.faults.start_suspect();
    return true;
  }
  im.faults.fail_all(notice_status(im, m), /*tell_peers=*/false);
  return true;
}

}  // namespace coll

Communicator::Impl::Impl(Group& g) : group(g) {}

coll::Faults::Faults(Impl& owner) : im(owner) {}
coll::Faults::~Faults() = default;

Communicator::Impl::~Impl() {
  health.server.reset();  // its thread reads this Impl
  shutdown();
  if (faults.notices && faults.notices->posted > 0) coll::park(std::move(faults.notices));
}

void Communicator::Impl::shutdown() {
  if (!faults.notices || shut) return;
  shut = true;
  faults.abort_if_requested();  // requested while no thread drove the communicator
  if (!faults.notices->settle.ok() && broken.ok())
    faults.fail_all(faults.notices->settle);  // peers learn now
  if (faults.notices->sends_pending) faults.flush_notices();
}

bool Communicator::Impl::transport_holds_requests() const {
  for (const coll::Task& op : ops)
    if (op.sends_done < op.sends_total || op.recvs_done < op.recvs_total || op.hdr_pending > 0)
      return true;
  return false;
}

uint64_t Communicator::Impl::requests_out() const {
  uint64_t k = 0;
  if (!faults.notices) return 0;
  for (uint32_t v : faults.notices->pend_from) k += v;
  for (uint32_t v : faults.notices->pend_to) k += v;
  return k + static_cast<uint64_t>(faults.notices->posted) + faults.notices->sends_pending;
}

namespace coll {

// A destroyed communicator whose calls' requests the transport may still hold: kept whole
// (scratch, work and fusion buffers, received headers, notices), so a late receive or RDMA
// read lands in memory that is still there rather than in the freed heap (seen: a rank
// destroyed in the middle of a ring allreduce over rdma corrupted malloc's lists). Only on
// failure paths; the user's buffers follow gw_coll.h's rule instead.
void park_impl(std::unique_ptr<Communicator::Impl> im) {
  static std::mutex mu;
  static auto* v = new std::vector<std::unique_ptr<Communicator::Impl>>();
  std::lock_guard<std::mutex> l(mu);
  v->push_back(std::move(im));
}

}  // namespace coll

void coll::Faults::count_post(int peer, bool is_send) {
  if (peer >= 0) ++(is_send ? notices->pend_to : notices->pend_from)[static_cast<size_t>(peer)];
}

void coll::Faults::send_notice(int slot, const Notice& m) {
  Notices& nt = *notices;
  std::memcpy(nt.slot(slot), &m, sizeof(m));
  for (int p = 0; p < im.n; ++p) {
    if (p == im.rank) continue;
    SendRequest r{nt.slot(slot), sizeof(Notice), coll::make_tag(kNoticeMagic, im.epoch, 0, 0),
                  coll::make_wr(kNoticeSlot, notice_id, true, static_cast<uint32_t>(slot)),
                  im.needs_mr ? nt.buf.mr() : nullptr};
    auto k = im.group.endpoint(p).post_send({&r, 1});  // a dead peer's refusal is expected
    if (k.ok() && *k == 1) ++nt.sends_pending;
  }
}

void coll::Faults::fail_all(const Status& st, bool tell_peers) {
  const bool first = im.broken.ok();
  if (first) {
    im.broken = st;
    im.health.set_broken(st);
    log::get("gw.coll")->warn("coll: rank {}: {}", im.rank, st.to_string());
    if (tell_peers) tell_failure(st);
  }
  for (auto& o : im.ops) {
    if (o.active && !o.done) {
      o.status = st;
      o.done = true;
      im.flight.end(o, st);
    }
  }
  if (first && im.flight.recorder) {
    (void)im.flight.dump(st.code() == Code::kTimeout   ? "timeout"
                         : st.code() == Code::kAborted ? "abort"
                                                       : "failure");
  }
}

void coll::Faults::tell_failure(const Status& st) {
  if (im.n == 1 || notices->sent_failure) return;
  notices->sent_failure = true;
  Notice m;
  m.kind = Notice::kFailed;
  m.code = static_cast<uint8_t>(st.code());
  m.culprit = st.rank();
  m.sender = im.rank;
  const auto msg = st.message();
  std::memcpy(m.text, msg.data(), std::min(msg.size(), sizeof(m.text) - 1));
  send_notice(Notices::kRecvs + 1, m);
}

void coll::Faults::flush_notices() {
  if (notices->flushed || im.broken.ok()) return;  // a failed receive alone tells no one
  notices->flushed = true;
  Deadline dl(kFlush);
  while (notices->sends_pending > 0 && !dl.expired()) {
    auto r = im.group.transport().cq().wait(im.comps, Millis(5));
    if (!r.ok() && r.status().code() != Code::kTimeout) return;
    for (size_t i = 0; r.ok() && i < *r; ++i) im.dispatch(im.comps[i]);
  }
}

// Not Transport::abort: that fails every endpoint at once, so the notice naming this rank
// (flush_notices) could no longer reach the peers, which would see only "closed the
// connection" (RemoteError, not Aborted). The driving thread sees the request within the
// 20 ms its waits poll at, well inside the 200 ms the peers are promised.
void coll::Faults::request_abort(std::string_view reason) {
  Notices& nt = *notices;
  std::lock_guard<std::mutex> l(nt.abort_mu);
  if (nt.abort_state.load(std::memory_order_relaxed) != 0) return;
  nt.abort_reason = reason.empty() ? std::string("no reason given") : std::string(reason);
  nt.abort_state.store(1, std::memory_order_release);
}

bool coll::Faults::abort_if_requested() {
  Notices& nt = *notices;
  if (nt.abort_state.load(std::memory_order_acquire) != 1) return false;
  std::string why;
  {
    std::lock_guard<std::mutex> l(nt.abort_mu);
    why = nt.abort_reason;
    nt.abort_state.store(2, std::memory_order_relaxed);
  }
  fail_all(Status(Code::kAborted, "coll: rank " + std::to_string(im.rank) + " of " +
                                      std::to_string(im.n) + " aborted the communicator: " + why)
               .with_rank(im.rank));
  flush_notices();
  return true;
}

uint64_t coll::Faults::waiting_mask() const {
  uint64_t m = 0;
  for (int p = 0; p < std::min(im.n, 64); ++p) {
    if (notices->pend_from[static_cast<size_t>(p)] || notices->pend_to[static_cast<size_t>(p)])
      m |= uint64_t{1} << p;
  }
  return m;
}

void coll::Faults::start_suspect() {
  Notices& nt = *notices;
  nt.suspect = true;
  nt.grace_end = Clock::now() + grace(im.timeout);
  if (nt.sent_report || im.n == 1) return;
  nt.sent_report = true;
  Notice m;
  m.kind = Notice::kReport;
  m.code = static_cast<uint8_t>(Code::kTimeout);
  m.sender = im.rank;
  m.waiting = waiting_mask();
  send_notice(Notices::kRecvs, m);
}

Status coll::Faults::post_error(const Status& st, int peer, const std::string& what) const {
  if (peer < 0 || im.group.endpoint(peer).status().ok())
    return st.with_context(what).with_rank(peer);
  return Status(Code::kRemoteError,
                what + ": rank " + std::to_string(peer) + " failed: " + st.to_string())
      .with_rank(peer);
}

void coll::Faults::peer_failed(Status st) {
  Notices& nt = *notices;
  if (!im.broken.ok() || !nt.settle.ok()) return;  // the first error stands
  nt.settle = std::move(st);
  nt.settle_end = Clock::now() + kSettle;
}

void coll::Faults::check_deadlines() {
  Notices& nt = *notices;
  if (!nt.settle.ok() && im.broken.ok() && Clock::now() >= nt.settle_end) fail_all(nt.settle);
  const Task* late = nullptr;
  for (auto& op : im.ops) {
    if (op.active && !op.done && op.deadline.expired()) {
      late = &op;
      break;
    }
  }
  if (!nt.suspect) {
    if (!late) return;
    start_suspect();
  }
  if (Clock::now() < nt.grace_end || !im.broken.ok()) return;
  // Culprits: ranks someone waits on that did not report; else any silent rank; else the
  // ones this rank waits on (every rank reported: they wait on each other, e.g. mismatched
  // point-to-point calls).
  const uint64_t self = im.rank < 64 ? uint64_t{1} << im.rank : 0;
  const uint64_t all = im.n >= 64 ? ~uint64_t{0} : (uint64_t{1} << im.n) - 1;
  const uint64_t mine = waiting_mask();
  const uint64_t silent = all & ~nt.reported & ~self;
  uint64_t culprits = (nt.waited | mine) & silent;
  if (!culprits) culprits = silent;
  if (!culprits) culprits = mine;
  const Task* op = late;
  for (auto& o : im.ops) {
    if (!op && o.active && !o.done) op = &o;
  }
  std::string what = op ? im.where(*op) : "coll: rank " + std::to_string(im.rank);
  if (op) {
    what += " (messages sent " + std::to_string(op->sends_done) + "/" +
            std::to_string(op->sends_total) + ", received " + std::to_string(op->recvs_done) + "/" +
            std::to_string(op->recvs_total) + ")";
  }
  what += late ? ": not finished before its deadline" : ": a peer timed out";
  what += "; waiting on " + ranks_text(mine) + "; " +
          (nt.reported ? ranks_text(nt.reported) + " timed out too and reported; "
                       : std::string("no other rank reported a timeout; ")) +
          ranks_text(culprits) +
          (culprits & silent ? " did not: stopped, stuck, or busy outside the communicator"
                             : " (every rank reported: they wait on each other, or on calls "
                               "that were never made)");
  fail_all(Status(Code::kTimeout, what).with_rank(lowest(culprits)));
}

}  // namespace gw
