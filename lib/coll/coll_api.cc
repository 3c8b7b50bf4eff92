// The Communicator's start calls (argument checks, buffers of each collective) and their
// blocking forms; wait, test and progress.
#include <cstring>
#include <limits>

#include "coll_device.h"
#include "coll_impl.h"

namespace gw {

using coll::Kind;

Status coll::check_buffers(const char* what, size_t count, DataType dt, const void* send,
                           const void* recv, bool* device) {
  *device = false;
  if (count > std::numeric_limits<size_t>::max() / 8 / 64)
    return Status(Code::kInvalidArgument, std::string("coll: ") + what + ": count too large");
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return Status(Code::kInvalidArgument, std::string("coll: ") + what + " of " +
                                              std::to_string(count) + " " + dtype_name(dt) +
                                              " elements with a null buffer");
  }
  if (count == 0) return Status();
  const bool ds = coll::is_device_buffer(send), dr = coll::is_device_buffer(recv);
  if (ds != dr) {
    return Status(Code::kInvalidArgument,
                  std::string("coll: ") + what + ": send is " + (ds ? "device" : "host") +
                      " memory but recv is " + (dr ? "device" : "host") +
                      " memory; pass both on the device or both on the host");
  }
  *device = ds;
  return Status();
}

// Any other overlap than in place would read bytes the call has already written, here or on a
// peer.
Status coll::check_overlap(const char* what, const void* send, size_t sbytes, const void* recv,
                           size_t rbytes, bool in_place, const char* layout) {
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (sbytes == 0 || rbytes == 0 || s + sbytes <= r || r + rbytes <= s || in_place) return Status();
  return Status(Code::kInvalidArgument, std::string("coll: ") + what +
                                            ": send and recv overlap, and not in place (" + layout +
                                            "); use separate buffers or that layout");
}

namespace {
using coll::check_buffers;
using coll::check_overlap;
}  // namespace

Result<CollHandle> Communicator::allreduce_async(const void* send, void* recv, size_t count,
                                                 DataType dt, ReduceOp op,
                                                 const CallOptions& call) {
  auto d = impl_->drive();
  const size_t bytes = count * dtype_size(dt);
  GW_RETURN_IF_ERROR(check_overlap("allreduce", send, bytes, recv, bytes, send == recv,
                                   "in place is send == recv"));
  if (coll::is_device_buffer(recv))  // GPU memory: lib/coll/coll_device_api.cc
    return coll::device_allreduce_async(*impl_, send, recv, count, dt, op, call);
  bool device = false;
  GW_RETURN_IF_ERROR(check_buffers("allreduce", count, dt, send, recv, &device));
  GW_ASSIGN_OR_RETURN(coll::Task * o, impl_->begin(Kind::kAllreduce, dt, op, count, call));
  o->in = static_cast<const uint8_t*>(send);
  o->work = o->out = static_cast<uint8_t*>(recv);
  return impl_->launch(*o);
}

Result<CollHandle> Communicator::allreduce_async(std::span<const TensorRef> bucket, DataType dt,
                                                 ReduceOp op, const CallOptions& call) {
  auto d = impl_->drive();
  size_t total = 0, on_device = 0, tensors = 0;
  for (auto& t : bucket) {
    bool device = false;
    GW_RETURN_IF_ERROR(
        check_buffers("allreduce bucket tensor", t.count, dt, t.send, t.recv, &device));
    total += t.count;
    on_device += device;
    tensors += t.count > 0;
  }
  if (on_device > 0 && on_device < tensors) {
    return Status(Code::kInvalidArgument,
                  "coll: fused allreduce bucket mixes device and host tensors (" +
                      std::to_string(on_device) + " of " + std::to_string(tensors) +
                      " on the device); put all of one bucket on one side");
  }
  if (on_device > 0) return coll::device_bucket_async(*impl_, bucket, total, dt, op, call);
  GW_ASSIGN_OR_RETURN(coll::Task * o, impl_->begin(Kind::kAllreduce, dt, op, total, call));
  Status st = o->fusion.ensure(impl_->group.transport(), total * o->es);
  if (!st.ok()) {
    o->active = false;
    return st;
  }
  // Pack into the registered fusion buffer and reduce it in place; unpacked when done.
  size_t off = 0;
  for (auto& t : bucket) {
    if (t.count) std::memcpy(o->fusion.data() + off * o->es, t.send, t.count * o->es);
    off += t.count;
  }
  o->bucket.assign(bucket.begin(), bucket.end());
  o->in = o->work = o->out = o->fusion.data();
  return impl_->launch(*o);
}

Result<CollHandle> Communicator::reduce_scatter_async(const void* send, void* recv,
                                                      size_t recv_count, DataType dt, ReduceOp op,
                                                      const CallOptions& call) {
  auto d = impl_->drive();
  bool device = false;
  GW_RETURN_IF_ERROR(check_buffers("reduce_scatter", recv_count, dt, send, recv, &device));
  const size_t block = recv_count * dtype_size(dt), nr = static_cast<size_t>(impl_->n);
  GW_RETURN_IF_ERROR(check_overlap(
      "reduce_scatter", send, block * nr, recv, block,
      recv == static_cast<const uint8_t*>(send) + static_cast<size_t>(impl_->rank) * block,
      "in place is recv == send + rank * recv_count"));
  if (device)  // the device reduction kernels: lib/coll/coll_device_api.cc
    return coll::device_reduce_scatter_async(*impl_, send, recv, recv_count, dt, op, call);
  const size_t total = recv_count * static_cast<size_t>(impl_->n);
  GW_ASSIGN_OR_RETURN(coll::Task * o, impl_->begin(Kind::kReduceScatter, dt, op, total, call));
  o->desc.count = recv_count;
  o->in = static_cast<const uint8_t*>(send);
  o->out = static_cast<uint8_t*>(recv);
  if (impl_->n == 1) {
    o->work = o->out;
  } else {
    Status st = o->workbuf.ensure(impl_->group.transport(), total * o->es);
    if (!st.ok()) {
      o->active = false;
      return st;
    }
    o->work = o->workbuf.data();
  }
  return impl_->launch(*o);
}

Result<CollHandle> Communicator::allgather_async(const void* send, void* recv, size_t send_count,
                                                 DataType dt, const CallOptions& call) {
  auto d = impl_->drive();
  bool device = false;
  GW_RETURN_IF_ERROR(check_buffers("allgather", send_count, dt, send, recv, &device));
  const size_t block = send_count * dtype_size(dt);
  GW_RETURN_IF_ERROR(check_overlap(
      "allgather", send, block, recv, block * static_cast<size_t>(impl_->n),
      send == static_cast<const uint8_t*>(recv) + static_cast<size_t>(impl_->rank) * block,
      "in place is send == recv + rank * send_count"));
  const size_t total = send_count * static_cast<size_t>(impl_->n);
  GW_ASSIGN_OR_RETURN(coll::Task * o,
                      impl_->begin(Kind::kAllgather, dt, ReduceOp::kSum, total, call));
  o->desc.count = send_count;
  // Device buffers: no reduction, so the ring moves them as they are (the transport stages
  // them where it cannot reach device memory) and only the local block is copied here.
  o->device = device;
  o->desc.device = device;
  o->in = static_cast<const uint8_t*>(send);
  o->work = o->out = static_cast<uint8_t*>(recv);
  return impl_->launch(*o);
}

Result<CollHandle> Communicator::broadcast_async(void* buf, size_t count, DataType dt, int root,
                                                 const CallOptions& call) {
  auto d = impl_->drive();
  bool device = false;
  GW_RETURN_IF_ERROR(check_buffers("broadcast", count, dt, buf, buf, &device));
  if (root < 0 || root >= impl_->n) {
    return Status(Code::kInvalidArgument, "coll: broadcast root " + std::to_string(root) +
                                              " outside 0.." + std::to_string(impl_->n - 1));
  }
  GW_ASSIGN_OR_RETURN(coll::Task * o,
                      impl_->begin(Kind::kBroadcast, dt, ReduceOp::kSum, count, call));
  o->root = root;
  o->desc.root = root;
  o->device = device;  // moved as they are, as allgather's
  o->desc.device = device;
  o->in = o->work = o->out = static_cast<uint8_t*>(buf);
  return impl_->launch(*o);
}

Result<CollHandle> Communicator::barrier_async(const CallOptions& call) {
  auto d = impl_->drive();
  GW_ASSIGN_OR_RETURN(coll::Task * o,
                      impl_->begin(Kind::kBarrier, DataType::kUInt8, ReduceOp::kSum, 1, call));
  Status st = o->fusion.ensure(impl_->group.transport(), 1);
  if (!st.ok()) {
    o->active = false;
    return st;
  }
  o->in = o->work = o->out = o->fusion.data();
  return impl_->launch(*o);
}

using coll::run_blocking;

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType dt, ReduceOp op,
                               const CallOptions& call) {
  auto d = impl_->drive();
  return run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                      [&] { return allreduce_async(send, recv, count, dt, op, call); });
}
Status Communicator::allreduce(std::span<const TensorRef> bucket, DataType dt, ReduceOp op,
                               const CallOptions& call) {
  auto d = impl_->drive();
  return run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                      [&] { return allreduce_async(bucket, dt, op, call); });
}
Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dt,
                                    ReduceOp op, const CallOptions& call) {
  auto d = impl_->drive();
  return run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                      [&] { return reduce_scatter_async(send, recv, recv_count, dt, op, call); });
}
Status Communicator::allgather(const void* send, void* recv, size_t send_count, DataType dt,
                               const CallOptions& call) {
  auto d = impl_->drive();
  return run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                      [&] { return allgather_async(send, recv, send_count, dt, call); });
}
Status Communicator::broadcast(void* buf, size_t count, DataType dt, int root,
                               const CallOptions& call) {
  auto d = impl_->drive();
  return run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                      [&] { return broadcast_async(buf, count, dt, root, call); });
}
Status Communicator::barrier(const CallOptions& call) {
  auto d = impl_->drive();
  return run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                      [&] { return barrier_async(call); });
}

// ---- driving: wait, test, progress ----------------------------------------------------------

Status Communicator::wait(CollHandle h, Nanos timeout) {
  auto& im = *impl_;
  auto d = im.drive();
  if (h.slot >= Impl::kSlots || !im.ops[h.slot].active || im.ops[h.slot].gen != h.gen)
    return Status(Code::kInvalidArgument, "coll: wait on an unknown or finished handle");
  coll::Task& op = im.ops[h.slot];
  Deadline dl(timeout);
  for (;;) {
    if (op.done) {
      im.flight.end(op, op.status);
      op.active = false;
      if (!op.status.ok()) im.faults.flush_notices();  // peers learn before the caller may exit
      return op.status;
    }
    // 20 ms: a blocked wait sees abort() that soon (a wake-up of the sleep costs ~2 us);
    // past the deadline, the timeout phase.
    Nanos w = std::min({dl.remaining(), op.deadline.remaining(), Nanos(Millis(20))});
    if (op.deadline.expired()) w = std::min(dl.remaining(), Nanos(Millis(10)));
    if (!im.poll_once(w).ok()) continue;  // op is failed now; loop returns its status
    if (!op.done && dl.expired()) {
      return Status(Code::kTimeout, im.where(op) + ": still running after " +
                                        std::to_string(timeout.count() / 1'000'000) +
                                        " ms; wait again");
    }
  }
}

Result<bool> Communicator::test(CollHandle h) {
  auto& im = *impl_;
  auto d = im.drive();
  if (h.slot >= Impl::kSlots || !im.ops[h.slot].active || im.ops[h.slot].gen != h.gen)
    return Status(Code::kInvalidArgument, "coll: test on an unknown or finished handle");
  (void)im.poll_once(Nanos(0));
  return im.ops[h.slot].done;
}

Status Communicator::progress() {
  auto d = impl_->drive();
  GW_RETURN_IF_ERROR(impl_->poll_once(Nanos(0)));
  return impl_->broken;
}

}  // namespace gw
