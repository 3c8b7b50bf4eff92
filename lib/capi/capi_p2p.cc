// C API: point-to-point send/receive over the Group's endpoints, user tags in a tag space of
// their own, completions taken from the transport's CQ (never while a collective is in flight:
// the Communicator polls the same CQ and would drop them).
#include <algorithm>

#include "capi_impl.h"

using gw::Code;
using gw::Status;
using gw::capi::guard;
using gw::capi::invalid;
using gw::capi::need;

namespace {

// Collectives use 0xC0 << 56; the Communicator ignores wr_ids whose top byte is >= its slots.
constexpr uint64_t kP2pTag = 0xC2ull << 56;  // in the communicator's tag family (coll_impl.h)
constexpr uint64_t kP2pWr = 0xFFull << 56;

// The caller's registration covering [buf, buf+len), else one made for this request.
gw::Result<const gw::MemoryRegion*> region_for(gw_comm& c, gw_request& r, const void* buf,
                                               size_t len) {
  auto& tr = c.g->transport();
  if (!tr.properties().requires_registration || len == 0) return nullptr;
  for (auto& m : c.mrs) {
    if (m->mr.contains(buf, len)) return &m->mr;
  }
  GW_ASSIGN_OR_RETURN(r.tmp_mr,
                      tr.register_memory(const_cast<void*>(buf), len, gw::MemKind::kHost));
  return &r.tmp_mr;
}

gw_status_t post(const char* fn, gw_comm_t* c, bool is_send, void* buf, size_t bytes, int peer,
                 uint32_t tag, size_t* received, int* source, gw_request_t** req, bool async) {
  return guard(fn, c, [&]() -> Status {
    GW_RETURN_IF_ERROR(gw::capi::check_comm(c));
    if (async) {
      GW_RETURN_IF_ERROR(need(req, "req"));
      *req = nullptr;
    }
    if (bytes > 0) GW_RETURN_IF_ERROR(need(buf, "buf"));
    const int n = c->g->size(), me = c->g->rank();
    const bool any = !is_send && peer == GW_ANY_SOURCE;
    if (!any && (peer < 0 || peer >= n || peer == me)) {
      return invalid("peer " + std::to_string(peer) + " is not another rank (0.." +
                     std::to_string(n - 1) + ", this is rank " + std::to_string(me) + ")");
    }
    if (c->colls_in_flight) {
      return invalid(std::to_string(c->colls_in_flight) +
                     " collective(s) in flight: wait for them before send/receive (both "
                     "share the transport's completion queue)");
    }
    gw_request* r = gw::capi::add_request(*c, false);
    r->is_send = is_send;
    r->peer = peer;
    r->tag = tag;
    r->bytes = bytes;
    r->deadline = gw::Deadline(c->timeout);
    r->received = received;
    r->source = source;
    auto drop = [&](const Status& st) {
      Status out = st.with_context(gw::capi::describe(*r));
      gw::capi::finish_request(r);
      return out;
    };
    auto mr = region_for(*c, *r, buf, bytes);
    if (!mr.ok()) return drop(mr.status());
    const uint64_t t = kP2pTag | uint64_t{c->g->epoch() & 0xFF} << 48 | tag,
                   wr = kP2pWr | uint64_t{r->gen} << 32 | r->slot;
    gw::Result<size_t> took = size_t{0};
    if (is_send) {
      gw::SendRequest s{buf, bytes, t, wr, *mr};
      took = c->g->endpoint(peer).post_send({&s, 1});
    } else {
      gw::RecvRequest q{buf, bytes, t, wr, *mr};
      took =
          any ? c->g->transport().post_recv_any({&q, 1}) : c->g->endpoint(peer).post_recv({&q, 1});
    }
    if (!took.ok()) return drop(took.status());
    if (*took != 1)
      return drop(Status(Code::kResourceExhausted, "queue full: wait for earlier requests"));
    if (async) {
      *req = r;
      return Status();
    }
    while (!r->done) GW_RETURN_IF_ERROR(gw::capi::p2p_progress(*c, r->deadline.remaining()));
    Status st = r->status;
    gw::capi::finish_request(r);
    return st;
  });
}

// Record the outcome of one send/receive completion.
void complete(gw_request& r, const gw::Completion& k) {
  r.done = true;
  if (k.code == Code::kOk) {
    if (r.received) *r.received = k.len;
    if (r.source) *r.source = static_cast<int>(k.peer_id);
    return;
  }
  std::string peer = "rank " + std::to_string(k.peer_id);
  if (k.code == Code::kInvalidArgument && !r.is_send) {
    r.status = invalid(gw::capi::describe(r) + ": " + peer + " sent a " + std::to_string(k.len) +
                       "-byte message, longer than the buffer");
    return;
  }
  Status why = k.ep ? k.ep->status() : Status(k.code, gw::code_name(k.code));
  r.status = Status(why.ok() ? k.code : why.code(),
                    gw::capi::describe(r) + ": " + peer + " failed: " + why.to_string())
                 .with_rank(static_cast<int>(k.peer_id));
}

}  // namespace

namespace gw::capi {

std::string describe(const gw_request& r) {
  std::string who = r.peer == GW_ANY_SOURCE ? "any rank" : "rank " + std::to_string(r.peer);
  return std::string(r.is_send ? "gw_send to " : "gw_recv from ") + who + " (tag " +
         std::to_string(r.tag) + ", " + std::to_string(r.bytes) + " B)";
}

Status p2p_progress(gw_comm& c, Nanos wait) {
  auto& cq = c.g->transport().cq();
  wait = std::min(wait, Nanos(Millis(50)));  // gw_comm_abort from another thread: seen that soon
  auto got = wait.count() > 0 ? cq.wait(c.comps, wait) : cq.poll(c.comps);
  if (!got.ok() && got.status().code() != Code::kTimeout)
    return got.status().with_context("transport failed");
  size_t others = 0;  // the communicator's (failure notices): moved to the front, handed over
  for (size_t i = 0; got.ok() && i < *got; ++i) {
    const Completion& k = c.comps[i];
    if (k.op == Op::kEndpointError || (k.wr_id & kP2pWr) != kP2pWr) {
      c.comps[others++] = k;
      continue;
    }
    const uint32_t slot = static_cast<uint32_t>(k.wr_id), gen = (k.wr_id >> 32) & 0xFFFFFF;
    if (slot >= c.reqs.size()) continue;
    gw_request& r = *c.reqs[slot];
    if (r.active && !r.is_coll && !r.done && r.gen == gen) complete(r, k);
  }
  // A send/receive past its deadline stays posted (the transport cannot take it back), so
  // its buffer may still be written: the communicator is unusable from here on, and the
  // peers are told (an abort naming this rank), as the collectives' timeouts tell them.
  for (auto& r : c.reqs) {
    if (!r->active || r->is_coll || r->done || !r->deadline.expired()) continue;
    r->done = true;
    r->status = Status(Code::kTimeout, describe(*r) + ": not finished within " +
                                           std::to_string(c.timeout.count() / 1'000'000) +
                                           " ms; the peer may have stopped or not posted it")
                    .with_rank(r->peer);
    if (c.broken.ok()) {
      c.broken = r->status;
      c.comm->abort(r->status.message());
    }
  }
  // A notice or an abort (from any thread) fails every send/receive in flight.
  if (Status st = c.comm->handle({c.comps.data(), others}); !st.ok()) {
    for (auto& r : c.reqs) {
      if (!r->active || r->is_coll || r->done) continue;
      r->done = true;
      r->status = st;
    }
    if (c.broken.ok()) c.broken = st;
  }
  return Status();
}

}  // namespace gw::capi

extern "C" {

gw_status_t gw_send(gw_comm_t* c, const void* buf, size_t bytes, int peer, uint32_t tag) {
  return post("gw_send", c, true, const_cast<void*>(buf), bytes, peer, tag, nullptr, nullptr,
              nullptr, false);
}
gw_status_t gw_send_start(gw_comm_t* c, const void* buf, size_t bytes, int peer, uint32_t tag,
                          gw_request_t** req) {
  return post("gw_send_start", c, true, const_cast<void*>(buf), bytes, peer, tag, nullptr, nullptr,
              req, true);
}
gw_status_t gw_recv(gw_comm_t* c, void* buf, size_t cap, int peer, uint32_t tag, size_t* received,
                    int* source) {
  return post("gw_recv", c, false, buf, cap, peer, tag, received, source, nullptr, false);
}
gw_status_t gw_recv_start(gw_comm_t* c, void* buf, size_t cap, int peer, uint32_t tag,
                          size_t* received, int* source, gw_request_t** req) {
  return post("gw_recv_start", c, false, buf, cap, peer, tag, received, source, req, true);
}

}  // extern "C"
