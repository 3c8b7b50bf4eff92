// Registration, isend/irecv/test/iflush. Hot path: requests come from each comm's fixed pool,
// no allocation, no logging except on the error path (first failure of a comm, at WARN).
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "nccl_plugin.h"

namespace gw::nccl {
namespace {

Request* take_slot(Comm* c) {
  for (auto& r : c->reqs) {
    if (!r.used) {
      r.used = true;
      r.abandoned = false;
      r.code = Code::kOk;
      ++c->in_flight;
      return &r;
    }
  }
  return nullptr;
}

void release(Request* r) {
  r->used = false;
  --r->comm->in_flight;
}

uint64_t wr_id(Request* r, unsigned part) { return reinterpret_cast<uint64_t>(r) | part; }

/// The comm's first error, logged once. Caller holds dev->mu.
ncclResult_t comm_error(Comm* c, const Status& s) {
  if (c->warned) return s.code() == Code::kInvalidArgument ? ncclInvalidArgument : ncclRemoteError;
  c->warned = true;
  return fail(s.with_context(std::string(c->send ? "send" : "recv") + " comm to " + c->peer));
}

Status health(Comm* c) {
  if (!c->dev->error.ok()) return c->dev->error;
  return c->link->ep->status();
}

/// Post the parts of a grouped receive that the transport has not taken yet.
Status post_rest(Request* q) {
  if (q->posted == q->n) return Status();
  auto got =
      q->comm->link->ep->post_recv({q->parts + q->posted, static_cast<size_t>(q->n - q->posted)});
  if (!got.ok()) return got.status();
  q->posted = static_cast<uint8_t>(q->posted + *got);
  return Status();
}

/// mincore-free probe: msync fails with ENOMEM when part of the range is not mapped.
bool mapped(const void* p, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = a & ~(page - 1);
  return ::msync(reinterpret_cast<void*>(lo), a + n - lo, MS_ASYNC) == 0 || errno != ENOMEM;
}

Status check_range(const Device& d, void* data, size_t size, int type, MemKind* kind) {
  auto where = [&] {
    char b[96];
    std::snprintf(b, sizeof b, "regMr(%p, %zu bytes, type %d) on %s", data, size, type,
                  d.name.c_str());
    return std::string(b);
  };
  if (type == GW_NCCL_PTR_HOST) {
    *kind = MemKind::kHost;
  } else if (type == GW_NCCL_PTR_CUDA) {
    *kind = MemKind::kCudaDevice;
    bool ok = false;
    for (MemKind k : d.t->properties().zero_copy_kinds) ok |= k == MemKind::kCudaDevice;
    if (!ok) {
      return Status(Code::kNotSupported,
                    where() +
                        ": this transport does not move CUDA memory without staging "
                        "(only rdma with GPUDirect does); NCCL should not have asked");
    }
  } else {
    return Status(Code::kInvalidArgument, where() + ": unknown memory type");
  }
  if (size == 0) return Status();
  if (!data) return Status(Code::kInvalidArgument, where() + ": null pointer");
  if (reinterpret_cast<uintptr_t>(data) + size < reinterpret_cast<uintptr_t>(data))
    return Status(Code::kInvalidArgument, where() + ": range wraps around the address space");
  if (*kind == MemKind::kHost && !mapped(data, size))
    return Status(Code::kInvalidArgument, where() + ": range is not mapped in this process");
  return Status();
}

}  // namespace

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  auto* c = static_cast<Comm*>(comm);
  if (!c || !mhandle) return fail(Status(Code::kInvalidArgument, "regMr: null comm or mhandle"));
  *mhandle = nullptr;
  Device* d = c->dev;
  try {
    std::lock_guard lk(d->mu);
    MemKind kind = MemKind::kHost;
    Status s = check_range(*d, data, size, type, &kind);
    if (!s.ok()) return fail(s);
    auto key = std::make_pair(reinterpret_cast<uintptr_t>(data), size);
    auto it = d->regs.find(key);
    if (it == d->regs.end() || it->second->region.kind() != kind) {
      auto r = d->t->register_memory(data, size, kind);
      if (!r.ok()) return fail(r.status().with_context("regMr on " + d->name));
      auto mr = std::make_unique<Mr>();
      mr->dev = d;
      mr->region = std::move(*r);
      if (it != d->regs.end() && it->second->refs > 0) {
        return fail(Status(Code::kInvalidArgument,
                           "regMr: the same range is registered as "
                           "another memory type"));
      }
      it = d->regs.insert_or_assign(key, std::move(mr)).first;
    }
    ++it->second->refs;
    *mhandle = it->second.get();
    return ncclSuccess;
  } catch (const std::exception& e) {
    return fail(Status(Code::kInternal, std::string("regMr: ") + e.what()));
  }
}

ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) noexcept {
  if (type == GW_NCCL_PTR_HOST || fd < 0) return reg_mr(comm, data, size, type, mhandle);
  (void)offset;
  return fail(Status(Code::kNotSupported,
                     "regMrDmaBuf: gradwire's transport interface takes no dma-buf fd; the "
                     "plugin does not report NCCL_PTR_DMABUF"));
}

ncclResult_t dereg_mr(void* comm, void* mhandle) noexcept {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return fail(Status(Code::kInvalidArgument, "deregMr: null comm"));
  Device* d = c->dev;
  std::lock_guard lk(d->mu);
  for (auto it = d->regs.begin(); it != d->regs.end(); ++it) {
    if (it->second.get() != mhandle) continue;
    if (--it->second->refs <= 0) d->regs.erase(it);
    return ncclSuccess;
  }
  return fail(Status(Code::kInvalidArgument, "deregMr: unknown or already deregistered handle"));
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void** request) noexcept {
  auto* c = static_cast<Comm*>(send_comm);
  *request = nullptr;
  std::lock_guard lk(c->dev->mu);
  if (Status h = health(c); !h.ok()) return comm_error(c, h);
  auto* mr = static_cast<Mr*>(mhandle);
  if (mr && !mr->region.contains(data, size)) {
    return comm_error(c, Status(Code::kInvalidArgument,
                                "isend: buffer is not inside the registration passed with it"));
  }
  Request* q = take_slot(c);
  if (!q) return ncclSuccess;  // NCCL calls again
  Link* l = c->link.get();
  SendRequest r{data, size, c->tag_hi | static_cast<uint32_t>(tag), wr_id(q, 0),
                mr ? &mr->region : nullptr};
  if (size >= kHoldMax) {
    // Large sends go at once (after those held, to keep their order): batching gains nothing
    // on them and measured slower (tcp, 1 MiB: 0.78x against 1.9x of gw-perf posted at once).
    if (l->nheld > 0) c->dev->post_held();
    if (l->nheld == 0) {
      auto got = l->ep->post_send({&r, 1});
      if (!got.ok()) {
        release(q);
        return comm_error(c, got.status());
      }
      if (*got == 1) {
        q->send = true;
        q->n = q->left = q->posted = 1;
        *request = q;
        return ncclSuccess;
      }
    }
  }
  if (l->nheld == kHeld) c->dev->progress();  // make room once, else NCCL calls again
  if (l->nheld == kHeld) {
    release(q);
    return ncclSuccess;
  }
  l->held[l->nheld++] = r;
  if (!l->listed) {
    l->listed = true;
    c->dev->holding.push_back(l);  // no allocation: capacity is one per link
  }
  q->send = true;
  q->n = q->left = 1;
  q->posted = 0;  // until post_held() hands it over
  *request = q;
  return ncclSuccess;
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** request) noexcept {
  auto* c = static_cast<Comm*>(recv_comm);
  *request = nullptr;
  std::lock_guard lk(c->dev->mu);
  if (n < 1 || n > kMaxRecvs)
    return comm_error(c, Status(Code::kInvalidArgument, "irecv: n outside 1..maxRecvs (8)"));
  if (Status h = health(c); !h.ok()) return comm_error(c, h);
  Request* q = take_slot(c);
  if (!q) return ncclSuccess;
  for (int i = 0; i < n; ++i) {
    auto* mr = mhandles ? static_cast<Mr*>(mhandles[i]) : nullptr;
    if (mr && !mr->region.contains(data[i], sizes[i])) {
      release(q);
      return comm_error(c, Status(Code::kInvalidArgument,
                                  "irecv: buffer is not inside the registration passed with it"));
    }
    q->parts[i] = RecvRequest{data[i], sizes[i], c->tag_hi | static_cast<uint32_t>(tags[i]),
                              wr_id(q, static_cast<unsigned>(i)), mr ? &mr->region : nullptr};
    q->sizes[i] = 0;
  }
  q->send = false;
  q->n = static_cast<uint8_t>(n);
  q->posted = 0;
  q->left = static_cast<uint8_t>(n);
  Status s = post_rest(q);
  if (s.ok() && q->posted == 0) {
    c->dev->progress();
    s = post_rest(q);
  }
  if (!s.ok()) {
    if (q->posted == 0) {
      release(q);
    } else {  // some parts are with the transport: progress() frees the slot after them
      q->left = static_cast<uint8_t>(q->left - (q->n - q->posted));
      q->posted = q->n;
      if (q->left == 0)
        release(q);
      else
        q->abandoned = true;
    }
    return comm_error(c, s);
  }
  if (q->posted == 0) {  // nothing taken: let NCCL retry rather than hold a slot
    release(q);
    return ncclSuccess;
  }
  *request = q;
  return ncclSuccess;
}

ncclResult_t iflush(void*, int, void** request) noexcept {
  *request = nullptr;  // host memory only: the data is visible once test() says done
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) noexcept {
  auto* q = static_cast<Request*>(request);
  Comm* c = q->comm;
  Device* d = c->dev;
  *done = 0;
  std::lock_guard lk(d->mu);
  if (q->left > 0) {
    if (!q->send)
      if (Status s = post_rest(q); !s.ok()) return comm_error(c, s);
    d->progress();
  }
  if (q->left > 0) {
    Status h = health(c);
    if (h.ok()) return ncclSuccess;
    if (q->send && q->posted == 0) unhold(q);
    // Failed: parts still held by the transport will complete (with errors) later; the slot
    // is freed by progress() then, not reused now.
    q->left = static_cast<uint8_t>(q->left - (q->n - q->posted));
    q->posted = q->n;
    if (q->left == 0)
      release(q);
    else
      q->abandoned = true;
    return comm_error(c, h);
  }
  *done = 1;
  for (unsigned i = 0; i < q->n; ++i) {
    size_t s = q->sizes[i];
    if (sizes) sizes[i] = s > INT32_MAX ? INT32_MAX : static_cast<int>(s);
  }
  Code code = q->code;
  release(q);
  if (code == Code::kOk) return ncclSuccess;
  if (code == Code::kInvalidArgument && !q->send) {
    // The transport keeps the endpoint usable; NCCL treats this as fatal anyway.
    for (unsigned i = 0; i < q->n; ++i) {
      if (q->sizes[i] <= q->parts[i].len) continue;
      GW_NCCL_WARN(
          "NET/gradwire: recv from %s, tag %u: a message of %zu bytes is longer than "
          "its receive buffer of %zu bytes (sender and receiver disagree on sizes)",
          c->peer.c_str(), static_cast<unsigned>(q->parts[i].tag & 0xffffffffu), q->sizes[i],
          q->parts[i].len);
    }
    return ncclInvalidUsage;
  }
  Status s = health(c);
  return comm_error(c, s.ok() ? Status(code, "request failed") : s);
}

void Device::post_held() {
  size_t keep = 0;
  for (Link* l : holding) {
    while (l->nheld > 0) {
      auto got = l->ep->post_send({l->held.data(), l->nheld});
      size_t n = got.ok() ? *got : 0;
      for (size_t i = 0; i < n; ++i) request_of(l->held[i].wr_id)->posted = 1;
      if (!got.ok()) {
        // A failed endpoint fails every held send; otherwise the transport refused the first.
        const bool down = !l->ep->status().ok();
        if (!down) fail(got.status().with_context("isend"));
        n = down ? l->nheld : 1;
        for (size_t i = 0; i < n; ++i) {
          Request* q = request_of(l->held[i].wr_id);
          q->code = got.status().code();
          q->posted = 1;
          q->left = 0;
          if (q->comm->closed) release(q);  // nobody will test() it any more
        }
      }
      std::move(l->held.begin() + n, l->held.begin() + l->nheld, l->held.begin());
      l->nheld -= static_cast<uint32_t>(n);
      if (got.ok() && n == 0) break;  // send queue full: the next progress() tries again
    }
    if (l->nheld > 0)
      holding[keep++] = l;
    else
      l->listed = false;
  }
  holding.resize(keep);
}

void unhold(Request* q) {
  Link* l = q->comm->link.get();
  const uint64_t id = wr_id(q, 0);
  for (uint32_t i = 0; i < l->nheld; ++i) {
    if (l->held[i].wr_id != id) continue;
    std::move(l->held.begin() + i + 1, l->held.begin() + l->nheld, l->held.begin() + i);
    --l->nheld;
    return;
  }
}

void retire(Comm* c) {
  // Receives still posted stay with the shared Endpoint (the interface cannot cancel them);
  // no message carries this comm's id any more, so none can match.
  c->closed = true;
  c->link.reset();
  for (auto& r : c->reqs)
    if (r.used && r.left == 0) release(&r);  // done but never tested
  Device* d = c->dev;
  if (c->in_flight == 0) {
    delete c;
  } else {
    d->zombies.emplace_back(c);  // completions may still name its requests
  }
}

}  // namespace gw::nccl
