/// @file gw_core_inl.h
/// The transport core's hot paths, inline (included by gw_endpoint_core.h only): a driver's arrival
/// path calls begin/finish once per message with no virtual call, and the request checks
/// build an error text only when a request is wrong.
#pragma once

namespace gw::core {

inline int EndpointCore::begin(uint64_t seq, uint64_t tag, uint64_t len, bool defer) {
  if (free_.empty()) return -1;
  int ri = recvs_.head();
  while (ri >= 0 && recvs_[ri].req.tag != kAnyTag && recvs_[ri].req.tag != tag)
    ri = recvs_.next(ri);
  auto& any = t_->any_;
  int ai = any_source_ ? any.head() : -1;
  while (ai >= 0 && any[ai].req.tag != kAnyTag && any[ai].req.tag != tag) ai = any.next(ai);
  const int m = free_.back();
  InMsg& im = msgs_[static_cast<size_t>(m)];
  if (ri < 0 && ai < 0 && t_->ndrops_ > 0 && t_->dropped(tag)) [[unlikely]] {
    im.dest = Dest::kDrain;  // a cancelled communicator's: its bytes go nowhere
    im.base = nullptr;
    im.charged = 0;
    im.unode = -1;
    im.cookie = kNoCookie;
  } else if (ri < 0 && ai < 0) {
    if (unexp_.full() || (!defer && !t_->store_.take(len, &im.ubuf))) return -1;
    ++t_->counters_.unexpected_msgs;
    im.unode = unexp_.push_back(m);
    im.dest = Dest::kUnexpected;
    im.charged = defer ? 0 : len;
    im.base = im.ubuf.p.get();
    im.cookie = kNoCookie;
  } else {
    const bool use_any = ri < 0 || (ai >= 0 && any[ai].post_seq < recvs_[ri].post_seq);
    im.req = use_any ? any[ai].req : recvs_[ri].req;
    if (use_any) {
      any.erase(ai);
      ++outstanding_;  // the any-source reservation now completes through this endpoint
      im.cookie = kNoCookie;
    } else {
      im.cookie = recvs_[ri].cookie;
      recvs_.erase(ri);
    }
    im.dest = Dest::kUser;
    im.base = static_cast<uint8_t*>(im.req.buf);
  }
  free_.pop_back();
  im.active = true;
  im.complete = im.claimed = im.claim_err = false;
  im.seq = seq;
  im.tag = tag;
  im.len = len;
  im.arrival = t_->arrivals_++;
  if (im.dest == Dest::kUser && len > im.req.len) reject(m, Code::kInvalidArgument);
  return m;
}

inline void EndpointCore::finish(int m) {
  InMsg& im = msgs_[static_cast<size_t>(m)];
  ++t_->counters_.msgs_received;
  switch (im.dest) {
    case Dest::kUser:
      complete(im.req.wr_id, im.tag, im.len, Op::kRecv, Code::kOk);
      release(m);
      break;
    case Dest::kDrain:
      release(m);
      break;
    case Dest::kUnexpected:
      im.complete = true;
      if (im.claimed)
        deliver(m);
      else if (t_->ndrops_ > 0 && t_->dropped(im.tag)) [[unlikely]]
        release(m);  // began before its tags were cancelled
      break;
  }
}

inline void EndpointCore::release(int m) {
  InMsg& im = msgs_[static_cast<size_t>(m)];
  if (im.dest == Dest::kUnexpected) {
    t_->store_.give(std::move(im.ubuf), im.charged);
    if (im.unode >= 0) unexp_.erase(im.unode);
    im.unode = -1;
  }
  im.base = nullptr;
  im.active = false;
  im.dest = Dest::kUser;
  free_.push_back(m);  // capacity reserved at init: no allocation
}

template <class Keep>
void EndpointCore::fail_receives(Code code, Keep keep) {
  while (recvs_.head() >= 0) {
    const int ri = recvs_.head();
    complete(recvs_[ri].req.wr_id, recvs_[ri].req.tag, 0, Op::kRecv, code);
    recvs_.erase(ri);
  }
  for (int m = 0; m < max_msgs(); ++m) {
    InMsg& im = msgs_[static_cast<size_t>(m)];
    if (!im.active || keep(m)) continue;
    const bool owed = im.dest == Dest::kUser || (im.claimed && !im.claim_err);
    if (owed) complete(im.req.wr_id, im.tag, 0, Op::kRecv, code);
    release(m);
  }
}

template <class Prep, class OnPosted, class Waiting>
Result<size_t> EndpointCore::post_recv(std::span<const RecvRequest> reqs, Prep prep,
                                       OnPosted posted, Waiting waiting) {
  if (t_->abort_.requested()) [[unlikely]]
    return t_->abort_.status();
  size_t n = 0;
  for (; n < reqs.size(); ++n) {
    const RecvRequest& r = reqs[n];
    const int m = find_unexpected(r.tag);
    // A peer that left in order left messages behind: they can still be received.
    Status st = failed() && m < 0 && !waiting(r.tag) ? error_ : prep(r);
    if (!st.ok()) {
      if (n == 0) return st;
      break;
    }
    if ((m < 0 && recvs_.full()) || !reserve()) break;
    if (m >= 0)
      bind(m, r);
    else
      posted(recvs_.push_back(core::Posted{r, t_->next_post_seq()}));
  }
  return n;
}

[[gnu::cold]] Status bad_send(const char* driver, const std::string& peer, const SendRequest& r,
                              uint64_t max_message);
[[gnu::cold]] Status bad_recv(const char* driver, const std::string& peer, const RecvRequest& r);

/// The checks of gw_transport.h's request rules, the same for every driver.
inline Status check_send(const char* driver, const std::string& peer, const SendRequest& r,
                         uint64_t max_message) {
  if (r.tag == kAnyTag || (r.buf == nullptr && r.len > 0) || r.len > max_message ||
      (r.mr && !r.mr->contains(r.buf, r.len))) [[unlikely]]
    return bad_send(driver, peer, r, max_message);
  return Status();
}
inline Status check_recv(const char* driver, const std::string& peer, const RecvRequest& r) {
  if ((r.buf == nullptr && r.len > 0) || (r.mr && !r.mr->contains(r.buf, r.len))) [[unlikely]]
    return bad_recv(driver, peer, r);
  return Status();
}

}  // namespace gw::core
