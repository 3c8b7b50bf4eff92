// The start calls of alltoall(v), gather and scatter (argument checks, the exchange's steps,
// the rank's own block copied here) and their blocking forms. Device buffers are moved as they
// are, as allgather's (the transport stages them where it cannot reach device memory); Bruck,
// which packs blocks on the host, takes host buffers only.
#include <algorithm>
#include <cstring>

#include "coll_device.h"
#include "coll_impl.h"

namespace gw {
namespace {

using coll::Kind;
using coll::Task;
using coll::XPart;

// A part is one message: a longer one than the transport takes is refused before anything is
// sent (every rank of an alltoall refuses alike).
Status check_part(const Communicator::Impl& im, const char* what, size_t bytes) {
  const size_t max = im.group.transport().properties().max_message_size;
  if (max == 0 || bytes <= max) return Status();
  return Status(Code::kInvalidArgument, std::string("coll: ") + what + ": a part of " +
                                            std::to_string(bytes) +
                                            " bytes exceeds the transport's max_message_size " +
                                            std::to_string(max) + "; split the call");
}

// One buffer of `bytes` (null only when empty); *device when it is device memory.
Status check_buf(const char* what, const char* name, const void* p, size_t bytes, bool* device) {
  *device = bytes > 0 && p && coll::is_device_buffer(p);
  if (bytes == 0 || p) return Status();
  return Status(Code::kInvalidArgument, std::string("coll: ") + what + ": null " + name +
                                            " buffer for " + std::to_string(bytes) + " bytes");
}

Status check_root(const Communicator::Impl& im, const char* what, int root) {
  if (root >= 0 && root < im.n) return Status();
  return Status(Code::kInvalidArgument, std::string("coll: ") + what + " root " +
                                            std::to_string(root) + " outside 0.." +
                                            std::to_string(im.n - 1));
}

Status mixed(const char* what) {
  return Status(Code::kInvalidArgument,
                std::string("coll: ") + what +
                    ": send and recv are of different memory kinds (device and host); pass "
                    "both on the device or both on the host");
}

// Register the caller's buffers whole (registering drivers), so every part finds them; copy
// this rank's own block; start the exchange.
Result<CollHandle> start_xchg(Communicator::Impl& im, Task& o, size_t send_ext, size_t recv_ext,
                              uint8_t* own_dst, const uint8_t* own_src, size_t own_bytes) {
  if (send_ext) (void)im.poster.mr_for(o, o.in, send_ext);
  if (recv_ext) (void)im.poster.mr_for(o, o.out, recv_ext);
  if (own_bytes && own_dst != own_src) {
    Status st;
    if (o.device)
      st = coll::copy_sync(own_dst, own_src, own_bytes);
    else
      std::memcpy(own_dst, own_src, own_bytes);
    if (!st.ok()) {
      o.active = false;
      return st;
    }
  }
  o.engine = coll::Engine::kXchg;
  return im.launch(o);
}

Result<Task*> begin(Communicator::Impl& im, Kind kind, DataType dt, size_t count, int root,
                    bool device, const void* send, void* recv, const CallOptions& call) {
  GW_ASSIGN_OR_RETURN(Task * o, im.begin(kind, dt, ReduceOp::kSum, count, call));
  o->root = root;
  o->desc.root = root;
  o->device = device;
  o->desc.device = device;
  o->in = static_cast<const uint8_t*>(send);
  o->work = o->out = static_cast<uint8_t*>(recv);
  o->xparts.clear();  // keeps its capacity: no allocation for a repeated call
  o->xrelay = false;
  o->xfinal = {};
  return o;
}

}  // namespace

Result<CollHandle> Communicator::alltoall_async(const void* send, void* recv, size_t count,
                                                DataType dt, const CallOptions& call) {
  auto& im = *impl_;
  auto d = im.drive();
  bool device = false;
  GW_RETURN_IF_ERROR(coll::check_buffers("alltoall", count, dt, send, recv, &device));
  const size_t b = count * dtype_size(dt), nb = static_cast<size_t>(im.n);
  GW_RETURN_IF_ERROR(coll::check_overlap("alltoall", send, b * nb, recv, b * nb, false,
                                         "alltoall has no in-place form"));
  GW_RETURN_IF_ERROR(check_part(im, "alltoall", b));
  const bool bruck = !device && im.n > 2 && b <= im.bruck_max_bytes;
  GW_ASSIGN_OR_RETURN(Task * o, begin(im, Kind::kAlltoall, dt, count, 0, device, send, recv, call));
  o->desc.algo = bruck;  // a rank configured otherwise is a mismatch, not a hang
  if (bruck) {
    o->engine = coll::Engine::kBruck;
    return im.launch(*o);
  }
  const int r = im.rank;
  for (int i = 1; i < im.n; ++i) {
    const int to = (r + i) % im.n, from = (r - i + im.n) % im.n;
    o->xparts.push_back(XPart{to, from, o->in + static_cast<size_t>(to) * b,
                              o->out + static_cast<size_t>(from) * b, b, b});
  }
  const size_t own = static_cast<size_t>(r) * b;
  return start_xchg(im, *o, b * nb, b * nb, o->out + own, o->in + own, b);
}

namespace {
// Bytes of an alltoallv buffer: the end of its furthest part; each part checked for size.
Result<size_t> extent(const Communicator::Impl& im, const size_t* counts, const size_t* displs,
                      size_t es) {
  size_t ext = 0;
  for (int j = 0; j < im.n; ++j) {
    const size_t c = counts[j] * es;
    GW_RETURN_IF_ERROR(check_part(im, "alltoallv", c));
    if (c) ext = std::max(ext, (displs[j] + counts[j]) * es);
  }
  return ext;
}
}  // namespace

Result<CollHandle> Communicator::alltoallv_async(const void* send, const size_t* send_counts,
                                                 const size_t* send_displs, void* recv,
                                                 const size_t* recv_counts,
                                                 const size_t* recv_displs, DataType dt,
                                                 const CallOptions& call) {
  auto& im = *impl_;
  auto d = im.drive();
  if (!send_counts || !send_displs || !recv_counts || !recv_displs) {
    return Status(Code::kInvalidArgument,
                  "coll: alltoallv: null counts or displacements (each needs size() entries)");
  }
  const size_t es = dtype_size(dt);
  GW_ASSIGN_OR_RETURN(size_t sext, extent(im, send_counts, send_displs, es));
  GW_ASSIGN_OR_RETURN(size_t rext, extent(im, recv_counts, recv_displs, es));
  bool ds = false, dr = false;
  GW_RETURN_IF_ERROR(check_buf("alltoallv", "send", send, sext, &ds));
  GW_RETURN_IF_ERROR(check_buf("alltoallv", "recv", recv, rext, &dr));
  if (sext && rext && ds != dr) return mixed("alltoallv");
  GW_RETURN_IF_ERROR(coll::check_overlap("alltoallv", send, sext, recv, rext, false,
                                         "alltoallv has no in-place form"));
  const int r = im.rank;
  const auto me = static_cast<size_t>(r);
  if (send_counts[me] != recv_counts[me]) {  // refused before the call takes a sequence number
    return Status(Code::kInvalidArgument, "coll: alltoallv on rank " + std::to_string(r) +
                                              ": sends itself " + std::to_string(send_counts[me]) +
                                              " elements but receives " +
                                              std::to_string(recv_counts[me]) + " from itself");
  }
  // Counts differ between ranks by design: the descriptor compares kind and dtype only.
  GW_ASSIGN_OR_RETURN(Task * o, begin(im, Kind::kAlltoallv, dt, 0, 0, ds || dr, send, recv, call));
  for (int i = 1; i < im.n; ++i) {
    const auto to = static_cast<size_t>((r + i) % im.n),
               from = static_cast<size_t>((r - i + im.n) % im.n);
    o->xparts.push_back(XPart{static_cast<int>(to), static_cast<int>(from),
                              o->in + send_displs[to] * es, o->out + recv_displs[from] * es,
                              send_counts[to] * es, recv_counts[from] * es});
  }
  return start_xchg(im, *o, sext, rext, o->out + recv_displs[me] * es, o->in + send_displs[me] * es,
                    send_counts[me] * es);
}

namespace {
// gather and scatter mirror each other: the root's `many` buffer (gather: recv, scatter: send)
// holds size() blocks, every rank's `one` buffer (the other) one block.
Result<CollHandle> start_rooted(Communicator::Impl& im, bool gather, const void* send, void* recv,
                                size_t count, DataType dt, int root, const CallOptions& call) {
  const char* what = gather ? "gather" : "scatter";
  GW_RETURN_IF_ERROR(check_root(im, what, root));
  const size_t b = count * dtype_size(dt), nb = static_cast<size_t>(im.n);
  const bool is_root = im.rank == root;
  const size_t many = is_root ? b * nb : 0, sbytes = gather ? b : many, rbytes = gather ? many : b;
  bool ds = false, dr = false;
  GW_RETURN_IF_ERROR(check_buf(what, "send", send, sbytes, &ds));
  GW_RETURN_IF_ERROR(check_buf(what, "recv", recv, rbytes, &dr));
  GW_RETURN_IF_ERROR(check_part(im, what, b));
  const auto own = static_cast<size_t>(root) * b;
  if (is_root) {
    if (b && ds != dr) return mixed(what);
    const void* one = gather ? send : recv;
    const auto* all = static_cast<const uint8_t*>(gather ? recv : send);
    GW_RETURN_IF_ERROR(coll::check_overlap(what, send, sbytes, recv, rbytes, one == all + own,
                                           gather ? "in place is send == recv + root * count"
                                                  : "in place is recv == send + root * count"));
  }
  GW_ASSIGN_OR_RETURN(
      Task * o, begin(im, gather ? Kind::kGather : Kind::kScatter, dt, count, root,
                      gather ? ds : dr, sbytes ? send : nullptr, rbytes ? recv : nullptr, call));
  auto tree = coll::tree::parts(im, *o, gather, b);
  if (!tree.ok()) {
    o->active = false;
    return tree.status();
  }
  o->desc.algo = *tree;  // a rank configured otherwise is a mismatch, not a hang
  if (*tree) return start_xchg(im, *o, 0, 0, nullptr, nullptr, 0);  // all through scratch
  for (int i = 1; i < im.n; ++i) {  // the root's peers, or this rank's root
    const int peer = is_root ? (root + i) % im.n : root;
    const size_t at = is_root ? static_cast<size_t>(peer) * b : 0;
    if (gather) {
      o->xparts.push_back(is_root ? XPart{-1, peer, nullptr, o->out + at, 0, b}
                                  : XPart{peer, -1, o->in, nullptr, b, 0});
    } else {
      o->xparts.push_back(is_root ? XPart{peer, -1, o->in + at, nullptr, b, 0}
                                  : XPart{-1, peer, nullptr, o->out, 0, b});
    }
    if (!is_root) break;
  }
  if (!is_root) return start_xchg(im, *o, sbytes, rbytes, nullptr, nullptr, 0);
  return start_xchg(im, *o, sbytes, rbytes, o->out + (gather ? own : 0), o->in + (gather ? 0 : own),
                    b);
}
}  // namespace

Result<CollHandle> Communicator::gather_async(const void* send, void* recv, size_t count,
                                              DataType dt, int root, const CallOptions& call) {
  auto d = impl_->drive();
  return start_rooted(*impl_, true, send, recv, count, dt, root, call);
}

Result<CollHandle> Communicator::scatter_async(const void* send, void* recv, size_t count,
                                               DataType dt, int root, const CallOptions& call) {
  auto d = impl_->drive();
  return start_rooted(*impl_, false, send, recv, count, dt, root, call);
}

// ---- blocking forms ------------------------------------------------------------------------

Status Communicator::alltoall(const void* send, void* recv, size_t count, DataType dt,
                              const CallOptions& call) {
  auto d = impl_->drive();
  return coll::run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                            [&] { return alltoall_async(send, recv, count, dt, call); });
}
Status Communicator::alltoallv(const void* send, const size_t* send_counts,
                               const size_t* send_displs, void* recv, const size_t* recv_counts,
                               const size_t* recv_displs, DataType dt, const CallOptions& call) {
  auto d = impl_->drive();
  return coll::run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout, [&] {
    return alltoallv_async(send, send_counts, send_displs, recv, recv_counts, recv_displs, dt,
                           call);
  });
}
Status Communicator::gather(const void* send, void* recv, size_t count, DataType dt, int root,
                            const CallOptions& call) {
  auto d = impl_->drive();
  return coll::run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                            [&] { return gather_async(send, recv, count, dt, root, call); });
}
Status Communicator::scatter(const void* send, void* recv, size_t count, DataType dt, int root,
                             const CallOptions& call) {
  auto d = impl_->drive();
  return coll::run_blocking(*this, call.timeout.count() > 0 ? call.timeout : impl_->timeout,
                            [&] { return scatter_async(send, recv, count, dt, root, call); });
}

}  // namespace gw
