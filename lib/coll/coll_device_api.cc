// Collectives on device buffers: which engine runs them, and the host-staged path. Every rank
// picks the engine as for host buffers of that size (the algorithm, then the size), so ranks
// agree without talking, and a rank with the other kind of memory is caught by the descriptor.
//
// Host-staged (small allreduces, recursive doubling, small buckets): one device-to-host copy
// into a pinned slot of the communicator's StagingPool, the host engines on that slot (the
// reduction on the CPU: no kernel launch, no event per step), one host-to-device copy when the
// call completes (maybe_complete -> device_complete). Otherwise the device ring.
#include <algorithm>
#include <limits>

#include "coll_device.h"
#include "coll_impl.h"
#include "log.h"

namespace gw::coll {
namespace {

// A pinned slot of at least `bytes` for `op`; slots are kMaxInFlight (one per call in flight).
Result<uint8_t*> acquire_stage(Communicator::Impl& im, Task& op, size_t bytes) {
  GW_ASSIGN_OR_RETURN(DeviceOps * ops, device_ops());
  auto& pool = im.dev_stage;
  if (!pool || pool->chunk_bytes() < bytes) {
    if (pool && pool->free_slots() < pool->slots()) {
      return Status(Code::kResourceExhausted,
                    im.where(op) +
                        ": host-staged device calls in flight use the pinned "
                        "slots; wait for them before a larger one");
    }
    im.dev_stage_mr = MemoryRegion();
    pool.reset();
    StagingPool::Options o;
    o.chunk_bytes = std::max({bytes, im.device_host_max_bytes, size_t{4096}});
    o.slots = Communicator::kMaxInFlight;
    GW_ASSIGN_OR_RETURN(pool, StagingPool::create(ops, o, "coll rank " + std::to_string(im.rank)));
    auto mr = im.group.transport().register_memory(pool->base(), pool->bytes(), MemKind::kCudaHost);
    if (!mr.ok()) {
      pool.reset();
      return mr.status().with_context("coll: registering pinned staging slots");
    }
    im.dev_stage_mr = std::move(*mr);
    log::get("gw.coll")->info(
        "coll: rank {}: device-buffer collectives of at most {} bytes (coll.device_host_max_bytes, "
        "or recursive doubling) reduce on the host through {} pinned slots of {} KiB",
        im.rank, im.device_host_max_bytes, pool->slots(), pool->chunk_bytes() / 1024);
  }
  op.stage_slot = pool->acquire();  // cannot fail: a slot per Task
  if (op.stage_slot < 0) return Status(Code::kInternal, im.where(op) + ": no pinned slot free");
  return pool->data(op.stage_slot);
}

bool host_staged(const Communicator::Impl& im, const Task& t, size_t bytes) {
  return t.algo == Algo::kRecursiveDoubling || bytes <= im.device_host_max_bytes;
}

// Begin a device allreduce of `count` elements; the descriptor says "device buffers".
Result<Task*> begin_device(Communicator::Impl& im, Kind kind, DataType dt, ReduceOp op,
                           size_t count, const CallOptions& call) {
  GW_ASSIGN_OR_RETURN(Task * t, im.begin(kind, dt, op, count, call));
  t->device = true;
  t->desc.device = 1;
  return t;
}

// The device ring, to completion: its handle reports the status at once.
Result<CollHandle> run_ring(Communicator::Impl& im, Task& t, const void* send, void* recv,
                            void* rs_out) {
  CollHandle h{static_cast<uint32_t>(im.slot_of(t)), t.gen};
  Status st = run_device_ring(im, t, send, recv, rs_out);
  t.done = true;
  if (!st.ok()) im.faults.fail(t, st);  // breaks the communicator, as a host collective's failure
  t.status = st;
  return h;
}

Result<CollHandle> fail_start(Communicator::Impl& im, Task& t, Status st) {
  release_stage(im, t);
  t.active = false;
  return st;
}

}  // namespace

Result<CollHandle> device_allreduce_async(Communicator::Impl& im, const void* send, void* recv,
                                          size_t count, DataType dt, ReduceOp op,
                                          const CallOptions& call) {
  if (count > 0 && send == nullptr)
    return Status(Code::kInvalidArgument, "coll: allreduce of device memory from a null buffer");
  if (count > std::numeric_limits<size_t>::max() / 8 / 64)
    return Status(Code::kInvalidArgument, "coll: allreduce of device memory: count too large");
  GW_ASSIGN_OR_RETURN(Task * t, begin_device(im, Kind::kAllreduce, dt, op, count, call));
  const size_t bytes = count * t->es;
  if (!host_staged(im, *t, bytes)) return run_ring(im, *t, send, recv, nullptr);
  auto slot = acquire_stage(im, *t, bytes);
  if (!slot.ok()) return fail_start(im, *t, slot.status());
  if (Status st = im.dev_stage->copy_out_sync(*slot, send, bytes); !st.ok())
    return fail_start(im, *t, st);
  t->in = t->work = t->out = *slot;
  t->dev_out = static_cast<uint8_t*>(recv);
  return im.launch(*t);
}

Result<CollHandle> device_bucket_async(Communicator::Impl& im, std::span<const TensorRef> bucket,
                                       size_t total, DataType dt, ReduceOp op,
                                       const CallOptions& call) {
  GW_ASSIGN_OR_RETURN(Task * t, begin_device(im, Kind::kAllreduce, dt, op, total, call));
  const size_t es = t->es, bytes = total * es;
  Status st;
  if (host_staged(im, *t, bytes)) {
    // Each tensor straight into the pinned slot; device_complete copies each one back.
    auto slot = acquire_stage(im, *t, bytes);
    if (!slot.ok()) return fail_start(im, *t, slot.status());
    size_t off = 0;
    for (auto& x : bucket) {
      if (x.count) st = im.dev_stage->copy_out_sync(*slot + off * es, x.send, x.count * es);
      if (!st.ok()) return fail_start(im, *t, st);
      off += x.count;
    }
    t->in = t->work = t->out = *slot;
    t->bucket.assign(bucket.begin(), bucket.end());
    return im.launch(*t);
  }
  // Packed into a device buffer, reduced there by the ring, unpacked.
  if (im.dev_fusion.size() < bytes) {
    im.dev_fusion = DeviceBuffer();
    auto f = DeviceBuffer::create(bytes);
    if (!f.ok()) return fail_start(im, *t, f.status());
    im.dev_fusion = std::move(*f);
  }
  uint8_t* f = im.dev_fusion.get();
  size_t off = 0;
  for (auto& x : bucket) {
    if (st.ok()) st = copy_sync(f + off * es, x.send, x.count * es);
    off += x.count;
  }
  if (!st.ok()) return fail_start(im, *t, st);
  auto h = run_ring(im, *t, f, f, nullptr);
  off = 0;
  for (auto& x : bucket) {
    if (t->status.ok()) st = copy_sync(x.recv, f + off * es, x.count * es);
    if (!st.ok()) t->status = st;
    off += x.count;
  }
  return h;
}

Result<CollHandle> device_reduce_scatter_async(Communicator::Impl& im, const void* send, void* recv,
                                               size_t recv_count, DataType dt, ReduceOp op,
                                               const CallOptions& call) {
  const size_t total = recv_count * static_cast<size_t>(im.n);
  GW_ASSIGN_OR_RETURN(Task * t, begin_device(im, Kind::kReduceScatter, dt, op, total, call));
  t->desc.count = recv_count;
  // The ring reduces in a device work buffer (send stays untouched), the last step into recv.
  const size_t bytes = total * t->es;
  if (im.n > 1 && im.dev_work.size() < bytes) {
    im.dev_work = DeviceBuffer();
    auto w = DeviceBuffer::create(bytes);
    if (!w.ok()) return fail_start(im, *t, w.status());
    im.dev_work = std::move(*w);
  }
  return run_ring(im, *t, send, im.n > 1 ? im.dev_work.get() : recv, recv);
}

Status device_complete(Communicator::Impl& im, Task& op) {
  Status st;
  const size_t es = op.es;
  if (op.dev_out) {
    st = im.dev_stage->copy_in_sync(op.dev_out, op.work, op.count * es);
  } else {
    size_t off = 0;
    for (auto& x : op.bucket) {
      if (x.count && st.ok())
        st = im.dev_stage->copy_in_sync(x.recv, op.work + off * es, x.count * es);
      off += x.count;
    }
  }
  op.bucket.clear();
  op.dev_out = nullptr;
  release_stage(im, op);
  if (!st.ok()) return st.with_context(im.where(op) + ": copying the result to the device");
  return st;
}

void release_stage(Communicator::Impl& im, Task& op) {
  if (op.stage_slot < 0) return;
  if (im.dev_stage) im.dev_stage->release(op.stage_slot);
  op.stage_slot = -1;
}

}  // namespace gw::coll
