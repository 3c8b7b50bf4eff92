// C API: collectives (blocking and started), and gw_wait / gw_test for every request kind.
#include "capi_impl.h"

using gw::Code;
using gw::Status;
using gw::capi::guard;
using gw::capi::invalid;
using gw::capi::need;

namespace {

Status check_op(gw_op_t op) {
  auto v = static_cast<int>(op);
  if (v < 0 || v >= gw::kNumReduceOps)
    return invalid("op " + std::to_string(v) + " is not a gw_op_t (GW_SUM .. GW_AVG)");
  return Status();
}

// count elements of dtype in each of `blocks` blocks; buffers may be NULL only when count is 0.
Status check_buffers(gw_dtype_t dt, size_t count, size_t blocks, const void* send,
                     const void* recv) {
  GW_ASSIGN_OR_RETURN(size_t es, gw::capi::dtype_bytes(dt));
  GW_RETURN_IF_ERROR(gw::capi::check_count(count, es, blocks));
  if (count > 0) {
    GW_RETURN_IF_ERROR(need(send, "send buffer"));
    GW_RETURN_IF_ERROR(need(recv, "recv buffer"));
  }
  return Status();
}

// Checks shared by every collective, then start it; without `req` (blocking form) wait for
// it too. `check` validates the call's own arguments once the communicator is known good.
template <class Check, class Start>
gw_status_t run(const char* fn, gw_comm_t* c, bool async, gw_request_t** req, Check check,
                Start start) {
  return guard(fn, c, [&]() -> Status {
    GW_RETURN_IF_ERROR(gw::capi::check_comm(c));
    if (async) {
      GW_RETURN_IF_ERROR(need(req, "req"));
      *req = nullptr;
    }
    GW_RETURN_IF_ERROR(check());
    if (c->p2p_in_flight) {
      return invalid(std::to_string(c->p2p_in_flight) +
                     " send/receive request(s) in flight: wait for them before a collective "
                     "(both share the transport's completion queue)");
    }
    GW_ASSIGN_OR_RETURN(gw::CollHandle h, start());
    if (!async) return c->comm->wait(h, c->timeout + gw::Millis(1000));
    gw_request* r = gw::capi::add_request(*c, true);
    r->coll = h;
    *req = r;
    return Status();
  });
}

gw::DataType dtype(gw_dtype_t dt) { return static_cast<gw::DataType>(dt); }
gw::ReduceOp rop(gw_op_t op) { return static_cast<gw::ReduceOp>(op); }

gw_status_t allreduce(const char* fn, gw_comm_t* c, const void* send, void* recv, size_t count,
                      gw_dtype_t dt, gw_op_t op, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&] {
        GW_RETURN_IF_ERROR(check_op(op));
        return check_buffers(dt, count, 1, send, recv);
      },
      [&] { return c->comm->allreduce_async(send, recv, count, dtype(dt), rop(op)); });
}

gw_status_t bucket(const char* fn, gw_comm_t* c, const gw_tensor_t* tensors, size_t n,
                   gw_dtype_t dt, gw_op_t op, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&]() -> Status {
        GW_RETURN_IF_ERROR(check_op(op));
        if (n == 0) return invalid("the bucket has no tensors (n is 0)");
        GW_RETURN_IF_ERROR(need(tensors, "tensors"));
        size_t total = 0;
        for (size_t i = 0; i < n; ++i) {
          Status st = check_buffers(dt, tensors[i].count, 1, tensors[i].send, tensors[i].recv);
          if (!st.ok()) return st.with_context("tensor " + std::to_string(i));
          if (tensors[i].count > SIZE_MAX / 2 - total) return invalid("total count overflows");
          total += tensors[i].count;
        }
        GW_ASSIGN_OR_RETURN(size_t es, gw::capi::dtype_bytes(dt));
        return gw::capi::check_count(total, es, 1);
      },
      [&] {
        std::vector<gw::TensorRef> refs(n);  // the Communicator keeps its own copy
        for (size_t i = 0; i < n; ++i)
          refs[i] = {tensors[i].send, tensors[i].recv, tensors[i].count};
        return c->comm->allreduce_async(refs, dtype(dt), rop(op));
      });
}

gw_status_t reduce_scatter(const char* fn, gw_comm_t* c, const void* send, void* recv, size_t count,
                           gw_dtype_t dt, gw_op_t op, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&] {
        GW_RETURN_IF_ERROR(check_op(op));
        return check_buffers(dt, count, static_cast<size_t>(c->g->size()), send, recv);
      },
      [&] { return c->comm->reduce_scatter_async(send, recv, count, dtype(dt), rop(op)); });
}

gw_status_t allgather(const char* fn, gw_comm_t* c, const void* send, void* recv, size_t count,
                      gw_dtype_t dt, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&] { return check_buffers(dt, count, static_cast<size_t>(c->g->size()), send, recv); },
      [&] { return c->comm->allgather_async(send, recv, count, dtype(dt)); });
}

gw_status_t broadcast(const char* fn, gw_comm_t* c, void* buf, size_t count, gw_dtype_t dt,
                      int root, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&]() -> Status {
        if (root < 0 || root >= c->g->size()) {
          return invalid("root " + std::to_string(root) + " outside 0.." +
                         std::to_string(c->g->size() - 1));
        }
        return check_buffers(dt, count, 1, buf, buf);
      },
      [&] { return c->comm->broadcast_async(buf, count, dtype(dt), root); });
}

gw_status_t barrier(const char* fn, gw_comm_t* c, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req, [] { return Status(); }, [&] { return c->comm->barrier_async(); });
}

gw_status_t alltoall(const char* fn, gw_comm_t* c, const void* send, void* recv, size_t count,
                     gw_dtype_t dt, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&] { return check_buffers(dt, count, static_cast<size_t>(c->g->size()), send, recv); },
      [&] { return c->comm->alltoall_async(send, recv, count, dtype(dt)); });
}

struct Alltoallv {
  const void* send;
  const size_t *send_counts, *send_displs;
  void* recv;
  const size_t *recv_counts, *recv_displs;
};

gw_status_t alltoallv(const char* fn, gw_comm_t* c, const Alltoallv& a, gw_dtype_t dt,
                      gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&]() -> Status {
        GW_RETURN_IF_ERROR(gw::capi::dtype_bytes(dt).status());
        GW_RETURN_IF_ERROR(need(a.send_counts, "send_counts"));
        GW_RETURN_IF_ERROR(need(a.send_displs, "send_displs"));
        GW_RETURN_IF_ERROR(need(a.recv_counts, "recv_counts"));
        return need(a.recv_displs, "recv_displs");
      },
      [&] {
        return c->comm->alltoallv_async(a.send, a.send_counts, a.send_displs, a.recv, a.recv_counts,
                                        a.recv_displs, dtype(dt));
      });
}

// gather (root's recv) and scatter (root's send): the root's buffer holds size blocks.
gw_status_t rooted(const char* fn, gw_comm_t* c, bool is_gather, const void* send, void* recv,
                   size_t count, gw_dtype_t dt, int root, gw_request_t** req, bool async) {
  return run(
      fn, c, async, req,
      [&]() -> Status {
        const int n = c->g->size();
        if (root < 0 || root >= n)
          return invalid("root " + std::to_string(root) + " outside 0.." + std::to_string(n - 1));
        GW_ASSIGN_OR_RETURN(size_t es, gw::capi::dtype_bytes(dt));
        GW_RETURN_IF_ERROR(gw::capi::check_count(count, es, static_cast<size_t>(n)));
        const bool at_root = c->g->rank() == root;
        if (count > 0 && (is_gather || at_root)) GW_RETURN_IF_ERROR(need(send, "send buffer"));
        if (count > 0 && (!is_gather || at_root)) GW_RETURN_IF_ERROR(need(recv, "recv buffer"));
        return Status();
      },
      [&] {
        return is_gather ? c->comm->gather_async(send, recv, count, dtype(dt), root)
                         : c->comm->scatter_async(send, recv, count, dtype(dt), root);
      });
}

// One step of gw_wait/gw_test on *req: done tells whether it finished (and was freed).
Status wait_or_test(gw_request_t** req, gw::Nanos timeout, bool* done) {
  *done = false;
  GW_RETURN_IF_ERROR(need(req, "req"));
  GW_RETURN_IF_ERROR(need(*req, "*req"));
  gw_request* r = *req;
  gw_comm& c = *r->comm;
  const bool poll_only = timeout.count() == 0;
  Status st;
  if (r->is_coll) {
    if (poll_only) {
      GW_ASSIGN_OR_RETURN(bool finished, c.comm->test(r->coll));
      if (!finished) return Status();
    }
    st = c.comm->wait(r->coll, poll_only ? gw::Nanos(1) : timeout);
    // wait()'s own timeout leaves the collective running (a failed one breaks the comm).
    if (st.code() == Code::kTimeout && c.comm->status().ok()) return st;
  } else {
    gw::Deadline dl(timeout);
    while (!r->done) {
      GW_RETURN_IF_ERROR(
          gw::capi::p2p_progress(c, std::min(dl.remaining(), r->deadline.remaining())));
      if (r->done) break;
      if (poll_only) return Status();
      if (dl.expired())
        return Status(Code::kTimeout, gw::capi::describe(*r) + ": still running; wait again");
    }
    st = r->status;
  }
  *done = true;
  *req = nullptr;
  gw::capi::finish_request(r);
  return st;
}

}  // namespace

extern "C" {

gw_status_t gw_allreduce(gw_comm_t* c, const void* send, void* recv, size_t count, gw_dtype_t dt,
                         gw_op_t op) {
  return allreduce("gw_allreduce", c, send, recv, count, dt, op, nullptr, false);
}
gw_status_t gw_allreduce_start(gw_comm_t* c, const void* send, void* recv, size_t count,
                               gw_dtype_t dt, gw_op_t op, gw_request_t** req) {
  return allreduce("gw_allreduce_start", c, send, recv, count, dt, op, req, true);
}
gw_status_t gw_allreduce_bucket(gw_comm_t* c, const gw_tensor_t* t, size_t n, gw_dtype_t dt,
                                gw_op_t op) {
  return bucket("gw_allreduce_bucket", c, t, n, dt, op, nullptr, false);
}
gw_status_t gw_allreduce_bucket_start(gw_comm_t* c, const gw_tensor_t* t, size_t n, gw_dtype_t dt,
                                      gw_op_t op, gw_request_t** req) {
  return bucket("gw_allreduce_bucket_start", c, t, n, dt, op, req, true);
}
gw_status_t gw_reduce_scatter(gw_comm_t* c, const void* send, void* recv, size_t count,
                              gw_dtype_t dt, gw_op_t op) {
  return reduce_scatter("gw_reduce_scatter", c, send, recv, count, dt, op, nullptr, false);
}
gw_status_t gw_reduce_scatter_start(gw_comm_t* c, const void* send, void* recv, size_t count,
                                    gw_dtype_t dt, gw_op_t op, gw_request_t** req) {
  return reduce_scatter("gw_reduce_scatter_start", c, send, recv, count, dt, op, req, true);
}
gw_status_t gw_allgather(gw_comm_t* c, const void* send, void* recv, size_t count, gw_dtype_t dt) {
  return allgather("gw_allgather", c, send, recv, count, dt, nullptr, false);
}
gw_status_t gw_allgather_start(gw_comm_t* c, const void* send, void* recv, size_t count,
                               gw_dtype_t dt, gw_request_t** req) {
  return allgather("gw_allgather_start", c, send, recv, count, dt, req, true);
}
gw_status_t gw_broadcast(gw_comm_t* c, void* buf, size_t count, gw_dtype_t dt, int root) {
  return broadcast("gw_broadcast", c, buf, count, dt, root, nullptr, false);
}
gw_status_t gw_broadcast_start(gw_comm_t* c, void* buf, size_t count, gw_dtype_t dt, int root,
                               gw_request_t** req) {
  return broadcast("gw_broadcast_start", c, buf, count, dt, root, req, true);
}
gw_status_t gw_barrier(gw_comm_t* c) { return barrier("gw_barrier", c, nullptr, false); }
gw_status_t gw_barrier_start(gw_comm_t* c, gw_request_t** req) {
  return barrier("gw_barrier_start", c, req, true);
}

gw_status_t gw_alltoall(gw_comm_t* c, const void* send, void* recv, size_t count, gw_dtype_t dt) {
  return alltoall("gw_alltoall", c, send, recv, count, dt, nullptr, false);
}
gw_status_t gw_alltoall_start(gw_comm_t* c, const void* send, void* recv, size_t count,
                              gw_dtype_t dt, gw_request_t** req) {
  return alltoall("gw_alltoall_start", c, send, recv, count, dt, req, true);
}
gw_status_t gw_alltoallv(gw_comm_t* c, const void* send, const size_t* send_counts,
                         const size_t* send_displs, void* recv, const size_t* recv_counts,
                         const size_t* recv_displs, gw_dtype_t dt) {
  return alltoallv("gw_alltoallv", c,
                   {send, send_counts, send_displs, recv, recv_counts, recv_displs}, dt, nullptr,
                   false);
}
gw_status_t gw_alltoallv_start(gw_comm_t* c, const void* send, const size_t* send_counts,
                               const size_t* send_displs, void* recv, const size_t* recv_counts,
                               const size_t* recv_displs, gw_dtype_t dt, gw_request_t** req) {
  return alltoallv("gw_alltoallv_start", c,
                   {send, send_counts, send_displs, recv, recv_counts, recv_displs}, dt, req, true);
}
gw_status_t gw_gather(gw_comm_t* c, const void* send, void* recv, size_t count, gw_dtype_t dt,
                      int root) {
  return rooted("gw_gather", c, true, send, recv, count, dt, root, nullptr, false);
}
gw_status_t gw_gather_start(gw_comm_t* c, const void* send, void* recv, size_t count, gw_dtype_t dt,
                            int root, gw_request_t** req) {
  return rooted("gw_gather_start", c, true, send, recv, count, dt, root, req, true);
}
gw_status_t gw_scatter(gw_comm_t* c, const void* send, void* recv, size_t count, gw_dtype_t dt,
                       int root) {
  return rooted("gw_scatter", c, false, send, recv, count, dt, root, nullptr, false);
}
gw_status_t gw_scatter_start(gw_comm_t* c, const void* send, void* recv, size_t count,
                             gw_dtype_t dt, int root, gw_request_t** req) {
  return rooted("gw_scatter_start", c, false, send, recv, count, dt, root, req, true);
}

gw_status_t gw_wait(gw_request_t** req, int64_t timeout_ms) {
  const gw_comm* c = req && *req ? (*req)->comm : nullptr;
  return guard("gw_wait", c, [&] {
    GW_RETURN_IF_ERROR(need(req, "req"));
    GW_RETURN_IF_ERROR(need(*req, "*req"));
    // Negative: until the request's own deadline fails it (plus a margin to see that).
    gw::Nanos t = timeout_ms < 0 ? (*req)->comm->timeout + gw::Millis(1000)
                                 : gw::Nanos(gw::Millis(std::max<int64_t>(timeout_ms, 1)));
    bool done = false;
    return wait_or_test(req, t, &done);
  });
}

gw_status_t gw_test(gw_request_t** req, int* done) {
  const gw_comm* c = req && *req ? (*req)->comm : nullptr;
  return guard("gw_test", c, [&] {
    GW_RETURN_IF_ERROR(need(done, "done"));
    bool d = false;
    Status st = wait_or_test(req, gw::Nanos(0), &d);
    *done = d ? 1 : 0;
    return st;
  });
}

}  // extern "C"
