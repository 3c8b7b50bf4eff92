// The transport core's cold paths: set-up, any-source receives, buffered-message delivery,
// failures, request errors. Hot paths are inline in gw_core_inl.h and gw_completion_sink.h.
#include <algorithm>
#include <cstring>
#include <new>

#include "gw_core.h"
#include "log.h"

namespace gw::core {

// --- CompletionSink ---

void CompletionSink::init(size_t depth) {
  depth_ = depth;
  events_ = requests_ = 0;
  ring_.init(depth);
}

void CompletionSink::grow(size_t cap) {
  Ring<Completion> bigger;
  bigger.init(cap);
  while (!ring_.empty()) {
    bigger.push(ring_.front());
    ring_.pop();
  }
  ring_ = std::move(bigger);
}

void CompletionSink::reserve_event() {
  ++events_;
  if (ring_.capacity() < depth_ + events_) grow(depth_ + events_ + 64);
}

void CompletionSink::overflow(const Completion& c) {
  // Every push is reserved, so this is a driver bug; still, never drop a completion.
  log::get("gw.transport")
      ->error(
          "transport core: completion pushed without a reservation "
          "(a driver bug; please report it)");
  grow(ring_.capacity() * 2 + 64);
  ring_.push(c);
}

void CompletionSink::purge(const Endpoint* ep) {
  const size_t n = ring_.size();
  for (size_t i = 0; i < n; ++i) {
    Completion c = ring_.front();
    ring_.pop();
    if (c.ep == ep)
      release(c);
    else
      ring_.push(c);
  }
}

// --- UnexpectedStore ---

bool UnexpectedStore::take(uint64_t len, UBuf* out) {
  if (used_ + len > budget_) return false;
  if (len > 0) {
    size_t i = 0;
    while (i < nkept_ && !(kept_[i].cap >= len && kept_[i].cap / 2 <= len)) ++i;
    if (i < nkept_) {
      *out = std::move(kept_[i]);
      kept_[i] = std::move(kept_[--nkept_]);
      kept_bytes_ -= out->cap;
    } else {
      out->p.reset(new (std::nothrow) uint8_t[len]);
      if (!out->p) return false;
      out->cap = len;
    }
  }
  used_ += len;
  return true;
}

UnexpectedStore::~UnexpectedStore() {
  for (size_t i = 0; i < nkept_; ++i) drop(kept_[i]);
}

void UnexpectedStore::drop(UBuf& b) {
  if (hook_ && b.p) hook_(hook_ctx_, b.p.get(), b.cap);
  b.p.reset();
  b.cap = 0;
}

void UnexpectedStore::give(UBuf b, uint64_t len) {
  used_ -= len;
  if (!b.p) return;
  if (b.cap > budget_) return drop(b);
  if (nkept_ == kKeep || kept_bytes_ + b.cap > budget_) {  // evict the oldest to make room
    if (nkept_ == 0) return drop(b);
    kept_bytes_ -= kept_[0].cap;
    drop(kept_[0]);
    kept_[0] = std::move(kept_[--nkept_]);
  }
  kept_bytes_ += b.cap;
  kept_[nkept_++] = std::move(b);
}

// --- TransportCore ---

void TransportCore::init(const char* driver, std::shared_ptr<spdlog::logger> log, size_t cq_depth,
                         size_t max_any, uint64_t unexpected_budget) {
  driver_ = driver;
  log_ = std::move(log);
  sink_.init(cq_depth);
  store_.init(unexpected_budget);
  any_.init(max_any);
}

void TransportCore::add_stats(std::map<std::string, uint64_t>& m) const {
  m["msgs_received"] = counters_.msgs_received;
  m["unexpected_msgs"] = counters_.unexpected_msgs;
  m["unexpected_bytes_now"] = store_.used();
  m["truncated_recvs"] = counters_.truncated_recvs;
  m["endpoint_errors"] = counters_.endpoint_errors;
}

bool TransportCore::request_abort(std::string_view reason) {
  return abort_.request(Status(
      Code::kAborted, std::string(driver_) + ": transport aborted: " +
                          (reason.empty() ? std::string("no reason given") : std::string(reason))));
}

void TransportCore::fail_any(Code code) {
  while (any_.head() >= 0) {
    const int i = any_.head();
    const RecvRequest r = any_[i].req;
    any_.erase(i);
    sink_.push(Completion{r.wr_id, r.tag, 0, nullptr, 0, Op::kRecv, code});
  }
}

size_t TransportCore::cancel_tags(uint64_t mask, uint64_t value) {
  accept_tags(mask, value);
  if (ndrops_ == kMaxDrops) {  // the oldest rule goes: its communicator is long gone
    std::move(drops_.begin() + 1, drops_.end(), drops_.begin());
    --ndrops_;
  }
  drops_[ndrops_++] = DropRule{mask, value};
  auto match = [&](uint64_t tag) { return tag != kAnyTag && (tag & mask) == value; };
  for (int i = any_.head(); i >= 0;) {
    const int next = any_.next(i);
    if (match(any_[i].req.tag)) {
      const RecvRequest r = any_[i].req;
      any_.erase(i);
      sink_.push(Completion{r.wr_id, r.tag, 0, nullptr, 0, Op::kRecv, Code::kAborted});
    }
    i = next;
  }
  size_t held = 0;
  for (EndpointCore* ep : eps_) {
    auto& rs = ep->recvs_;
    for (int i = rs.head(); i >= 0;) {
      const int next = rs.next(i);
      if (match(rs[i].req.tag)) {
        if (rs[i].cookie != kNoCookie) {
          ++held;  // the driver's peer may write into it (rdma): not ours to take back
        } else {
          ep->complete(rs[i].req.wr_id, rs[i].req.tag, 0, Op::kRecv, Code::kAborted);
          rs.erase(i);
        }
      }
      i = next;
    }
    for (int m = 0; m < ep->max_msgs(); ++m) {
      const InMsg& im = ep->msg(m);
      if (im.active && im.dest == Dest::kUnexpected && !im.claimed && im.complete && match(im.tag))
        ep->release(m);
    }
  }
  return held;
}

void TransportCore::accept_tags(uint64_t mask, uint64_t value) {
  size_t k = 0;
  for (size_t i = 0; i < ndrops_; ++i)
    if (drops_[i].mask != mask || drops_[i].value != value) drops_[k++] = drops_[i];
  ndrops_ = k;
}

Result<size_t> TransportCore::post_recv_any(std::span<const RecvRequest> reqs) {
  static const std::string kAny = "any peer";
  if (abort_.requested()) [[unlikely]]
    return abort_.status();
  size_t n = 0;
  for (; n < reqs.size(); ++n) {
    const RecvRequest& r = reqs[n];
    if (Status st = check_recv(driver_, kAny, r); !st.ok()) {
      if (n == 0) return st;
      break;
    }
    if (!sink_.reserve()) break;  // its completion first: none is ever dropped
    if (take_unexpected_any(r)) continue;
    if (any_.full()) {
      sink_.unreserve(1);
      break;
    }
    any_.push_back(Posted{r, next_post_seq()});
  }
  return n;
}

int TransportCore::find_any(uint64_t tag) const {
  for (int i = any_.head(); i >= 0; i = any_.next(i))
    if (any_[i].req.tag == kAnyTag || any_[i].req.tag == tag) return i;
  return -1;
}

bool TransportCore::take_unexpected_any(const RecvRequest& r) {
  EndpointCore* best = nullptr;
  int best_m = -1;
  for (EndpointCore* ep : eps_) {
    if (!ep->any_source_) continue;
    const int m = ep->find_unexpected(r.tag);
    if (m >= 0 && (!best || ep->msg(m).arrival < best->msg(best_m).arrival)) {
      best = ep;
      best_m = m;
    }
  }
  if (!best) return false;
  ++best->outstanding_;  // the reservation taken above completes through that endpoint
  best->bind(best_m, r);
  return true;
}

// --- EndpointCore ---

bool RecvHooks::copy_unexpected(const RecvRequest& r, const uint8_t* src, size_t n) {
  if (n) std::memcpy(r.buf, src, n);
  return true;
}

void EndpointCore::init(TransportCore* t, Endpoint* ep, size_t max_recvs, size_t max_msgs,
                        RecvHooks* hooks, size_t max_unexpected) {
  t_ = t;
  ep_ = ep;
  hooks_ = hooks;
  recvs_.init(max_recvs);
  msgs_.resize(max_msgs);
  unexp_.init(max_unexpected ? max_unexpected : max_msgs);
  free_.reserve(max_msgs);
  for (size_t i = max_msgs; i-- > 0;) free_.push_back(static_cast<int>(i));
  // The endpoint-error event can always be reported.
  t_->sink_.reserve_event();
  event_reserved_ = true;
  t_->eps_.push_back(this);
}

EndpointCore::~EndpointCore() {
  if (!t_) return;
  // Requests still pending are dropped without completions: the caller destroyed the
  // endpoint, so nobody is left to receive them.
  for (int m = 0; m < max_msgs(); ++m)
    if (msgs_[static_cast<size_t>(m)].active) release(m);
  auto& eps = t_->eps_;
  eps.erase(std::remove(eps.begin(), eps.end(), this), eps.end());
  t_->sink_.purge(ep_);
  t_->sink_.unreserve(outstanding_);
  if (event_reserved_) t_->sink_.release_event();
}

bool EndpointCore::set_error(const Status& st, bool orderly, bool sends_pending) {
  if (failed()) return false;
  error_ = st;
  ++t_->counters_.endpoint_errors;
  log_failure(*t_->log_, st, orderly, sends_pending || has_pending());
  return true;
}

void log_failure(spdlog::logger& log, const Status& st, bool orderly, bool pending) {
  log.log(orderly && !pending ? spdlog::level::debug : spdlog::level::warn, "{}", st.to_string());
}

bool EndpointCore::has_pending() const {
  if (recvs_.size() > 0) return true;
  for (const InMsg& im : msgs_)
    if (im.active && (im.dest != Dest::kUnexpected || im.claimed)) return true;
  return false;
}

void EndpointCore::reject(int m, Code code) {
  InMsg& im = msg(m);
  ++t_->counters_.truncated_recvs;
  complete(im.req.wr_id, im.tag, im.len, Op::kRecv, code);
  im.dest = Dest::kDrain;
  im.base = nullptr;
}

int EndpointCore::find_unexpected(uint64_t tag) const {
  for (int i = unexp_.head(); i >= 0; i = unexp_.next(i)) {
    const int m = unexp_[i];
    if (tag == kAnyTag || msg(m).tag == tag) return m;
  }
  return -1;
}

int EndpointCore::find_active(uint64_t seq) const {
  for (int m = 0; m < max_msgs(); ++m)
    if (msg(m).active && msg(m).seq == seq) return m;
  return -1;
}

void EndpointCore::bind(int m, const RecvRequest& r) {
  InMsg& im = msg(m);
  im.claimed = true;
  unexp_.erase(im.unode);
  im.unode = -1;
  im.req = r;
  if (im.len > r.len) {
    ++t_->counters_.truncated_recvs;
    im.claim_err = true;
    complete(r.wr_id, im.tag, im.len, Op::kRecv, Code::kInvalidArgument);
  }
  if (im.complete)
    deliver(m);
  else if (hooks_)
    hooks_->claimed(m);
}

void EndpointCore::deliver(int m) {
  InMsg& im = msg(m);
  if (!im.claim_err) {
    static RecvHooks plain;
    RecvHooks* h = hooks_ ? hooks_ : &plain;
    if (!h->copy_unexpected(im.req, im.ubuf.p.get(), im.len)) return;  // endpoint failed
    complete(im.req.wr_id, im.tag, im.len, Op::kRecv, Code::kOk);
  }
  release(m);
}

// --- request errors ---

Status bad_send(const char* driver, const std::string& peer, const SendRequest& r,
                uint64_t max_message) {
  const std::string d = driver;
  if (r.tag == kAnyTag)
    return Status(Code::kInvalidArgument,
                  d + ": send to " + peer + " with tag kAnyTag (it is for receives only)");
  if (r.buf == nullptr)
    return Status(Code::kInvalidArgument, d + ": send of " + std::to_string(r.len) + " bytes to " +
                                              peer + " from a null buffer");
  if (r.len > max_message)
    return Status(Code::kInvalidArgument,
                  d + ": send of " + std::to_string(r.len) + " bytes to " + peer + " exceeds " + d +
                      ".max_message_bytes = " + std::to_string(max_message) +
                      "; raise it on every rank or split the message");
  return Status(Code::kInvalidArgument,
                d + ": send buffer to " + peer + " is outside its memory region; register it");
}

Status bad_recv(const char* driver, const std::string& peer, const RecvRequest& r) {
  const std::string d = driver;
  if (r.buf == nullptr)
    return Status(Code::kInvalidArgument, d + ": receive of " + std::to_string(r.len) +
                                              " bytes from " + peer + " into a null buffer");
  return Status(Code::kInvalidArgument,
                d + ": receive buffer for " + peer + " is outside its memory region; register it");
}

}  // namespace gw::core
