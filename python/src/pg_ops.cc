// The ops of ProcessGroupGW: tensor checks and staging on the caller's thread, the requests as
// Engine posts, copy-out on the engine thread. Each op is one library collective (gather,
// scatter and all_to_all_single the native ones); reduce is an allreduce (a copy on non-roots).
#include <ATen/ATen.h>

#include "pg_util.h"
#include "process_group_gw.h"

namespace gw::torch {

using c10d::OpType;

RedPlan plan_reduce(const char* op, at::ScalarType st, const c10d::ReduceOp& rop) {
  RedPlan p;
  switch (static_cast<c10d::ReduceOp::RedOpType>(rop)) {
    case c10d::ReduceOp::SUM:
      p.op = ReduceOp::kSum;
      break;
    case c10d::ReduceOp::AVG:
      p.op = ReduceOp::kAvg;
      break;
    case c10d::ReduceOp::PRODUCT:
      p.op = ReduceOp::kProd;
      break;
    case c10d::ReduceOp::MIN:
      p.op = ReduceOp::kMin;
      break;
    case c10d::ReduceOp::MAX:
      p.op = ReduceOp::kMax;
      break;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "gradwire ", op, ": reduce op ",
                                  static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(rop)),
                                  " (BAND/BOR/BXOR/PREMUL_SUM) is not supported; gradwire "
                                  "reduces with SUM, AVG, PRODUCT, MIN, MAX");
  }
  const bool minmax = p.op == ReduceOp::kMin || p.op == ReduceOp::kMax;
  switch (st) {
    case at::kFloat:
      p.dt = DataType::kFloat32;
      break;
    case at::kDouble:
      p.dt = DataType::kFloat64;
      break;
    case at::kHalf:
      p.dt = DataType::kFloat16;
      break;
    case at::kBFloat16:
      p.dt = DataType::kBFloat16;
      break;
    case at::kInt:
      p.dt = DataType::kInt32;
      break;
    case at::kLong:
      p.dt = DataType::kInt64;
      break;
    case at::kByte:
      p.dt = DataType::kUInt8;
      break;
    case at::kChar:
      TORCH_CHECK_NOT_IMPLEMENTED(p.op != ReduceOp::kAvg, "gradwire ", op,
                                  ": AVG of int8 is not supported (no signed 8-bit kernel)");
      p.dt = DataType::kUInt8;
      p.flip_sign = minmax;
      break;
    case at::kBool:
      TORCH_CHECK_NOT_IMPLEMENTED(minmax, "gradwire ", op,
                                  ": bool tensors reduce with MIN or MAX only");
      p.dt = DataType::kUInt8;
      break;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "gradwire ", op, ": dtype ", st,
                                  " is not supported for reductions (float32/64, float16, "
                                  "bfloat16, int8/32/64, uint8)");
  }
  return p;
}

using WorkPtr = ProcessGroupGW::WorkPtr;

WorkPtr ProcessGroupGW::allreduce(Tensors& ts, const c10d::AllreduceOptions& o) {
  at::Tensor t = single(ts, "allreduce");
  if (t.is_sparse()) return allreduce_sparse(ts[0], o);
  RedPlan p = plan_reduce("allreduce", t.scalar_type(), o.reduceOp);
  at::Tensor w = stage(t, p);
  Job j;
  j.posts.push_back([w, p, c = call_opts(o.timeout)](Communicator& m) {
    return m.allreduce_async(ptr(w), ptr(w), w.numel(), p.dt, p.op, c);
  });
  if (!w.is_same(t)) j.finish = [t, w, p]() mutable { copy_back(t, w, p); };
  return submit(c10::make_intrusive<WorkGW>(OpType::ALLREDUCE, "allreduce", ts), std::move(j));
}

WorkPtr ProcessGroupGW::allreduce_coalesced(Tensors& ts, const c10d::AllreduceCoalescedOptions& o) {
  TORCH_CHECK(!ts.empty(), "gradwire allreduce_coalesced: no tensors");
  for (auto& t : ts) check_same(t, t, "allreduce_coalesced", "tensor");
  for (auto& t : ts) {
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(),
                "gradwire allreduce_coalesced: tensors must share one dtype, got ",
                ts[0].scalar_type(), " and ", t.scalar_type());
  }
  RedPlan p = plan_reduce("allreduce_coalesced", ts[0].scalar_type(), o.reduceOp);
  Tensors ws;
  for (auto& t : ts) ws.push_back(stage(t, p));
  Job j;
  j.posts.push_back([ws, p, c = call_opts(o.timeout)](Communicator& m) {
    std::vector<TensorRef> b;
    for (auto& w : ws) b.push_back({ptr(w), ptr(w), static_cast<size_t>(w.numel())});
    return m.allreduce_async(b, p.dt, p.op, c);
  });
  j.finish = [ts, ws, p]() mutable {
    for (size_t i = 0; i < ts.size(); ++i) copy_back(ts[i], ws[i], p);
  };
  return submit(c10::make_intrusive<WorkGW>(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", ts),
                std::move(j));
}

WorkPtr ProcessGroupGW::broadcast(Tensors& ts, const c10d::BroadcastOptions& o) {
  at::Tensor t = single(ts, "broadcast");
  TORCH_CHECK(o.rootRank >= 0 && o.rootRank < getSize() && o.rootTensor == 0,
              "gradwire broadcast: bad root rank ", o.rootRank, " / tensor ", o.rootTensor);
  at::Tensor w = stage(t, {});
  Job j;
  j.posts.push_back([w, root = int(o.rootRank), c = call_opts(o.timeout)](Communicator& m) {
    return m.broadcast_async(ptr(w), nbytes(w), DataType::kUInt8, root, c);
  });
  if (!w.is_same(t)) j.finish = [t, w]() mutable { t.copy_(w); };
  return submit(c10::make_intrusive<WorkGW>(OpType::BROADCAST, "broadcast", ts), std::move(j));
}

WorkPtr ProcessGroupGW::reduce(Tensors& ts, const c10d::ReduceOptions& o) {
  at::Tensor t = single(ts, "reduce");
  TORCH_CHECK(o.rootRank >= 0 && o.rootRank < getSize() && o.rootTensor == 0,
              "gradwire reduce: bad root rank ", o.rootRank, " / tensor ", o.rootTensor);
  RedPlan p = plan_reduce("reduce", t.scalar_type(), o.reduceOp);
  const bool root = o.rootRank == getRank();
  // An allreduce; non-roots reduce a copy, so their tensor is left as it was.
  at::Tensor w = root ? stage(t, p) : stage(t, p).clone();
  Job j;
  j.posts.push_back([w, p, c = call_opts(o.timeout)](Communicator& m) {
    return m.allreduce_async(ptr(w), ptr(w), w.numel(), p.dt, p.op, c);
  });
  if (root && !w.is_same(t)) j.finish = [t, w, p]() mutable { copy_back(t, w, p); };
  return submit(c10::make_intrusive<WorkGW>(OpType::REDUCE, "reduce", ts), std::move(j));
}

WorkPtr ProcessGroupGW::allgather(TensorLists& out, Tensors& in, const c10d::AllgatherOptions& o) {
  at::Tensor t = single(in, "allgather");
  TORCH_CHECK(out.size() == 1 && out[0].size() == static_cast<size_t>(getSize()),
              "gradwire allgather: expects one output list of ", getSize(), " tensors");
  for (auto& x : out[0]) check_same(x, t, "allgather", "an output tensor");
  const int64_t n = t.numel();
  at::Tensor src = t.contiguous(), flat = at::empty({getSize() * n}, t.options());
  Job j;
  j.posts.push_back([src, flat, c = call_opts(o.timeout)](Communicator& m) {
    return m.allgather_async(ptr(src), ptr(flat), nbytes(src), DataType::kUInt8, c);
  });
  j.finish = [outs = out[0], flat, n]() mutable {
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
  };
  return submit(c10::make_intrusive<WorkGW>(OpType::ALLGATHER, "allgather", out[0]), std::move(j));
}

WorkPtr ProcessGroupGW::_allgather_base(at::Tensor& out, at::Tensor& in,
                                        const c10d::AllgatherOptions& o) {
  check_cpu(in, "_allgather_base");
  check_cpu(out, "_allgather_base");
  TORCH_CHECK(out.numel() == in.numel() * getSize() && out.scalar_type() == in.scalar_type(),
              "gradwire _allgather_base: output must hold world size x input elements of ",
              in.scalar_type());
  at::Tensor src = in.contiguous(), w = out_buf(out);
  Job j;
  j.posts.push_back([src, w, c = call_opts(o.timeout)](Communicator& m) {
    return m.allgather_async(ptr(src), ptr(w), nbytes(src), DataType::kUInt8, c);
  });
  if (!w.is_same(out)) j.finish = [out, w]() mutable { out.copy_(w); };
  return submit(
      c10::make_intrusive<WorkGW>(OpType::_ALLGATHER_BASE, "_allgather_base", Tensors{out}),
      std::move(j));
}

WorkPtr ProcessGroupGW::gather(TensorLists& out, Tensors& in, const c10d::GatherOptions& o) {
  at::Tensor t = single(in, "gather");
  const int root = static_cast<int>(o.rootRank), me = getRank(), n = getSize();
  TORCH_CHECK(root >= 0 && root < n, "gradwire gather: bad root rank ", root);
  at::Tensor src = t.contiguous(), flat;
  Tensors results;
  if (me != root) {
    TORCH_CHECK(out.empty() || (out.size() == 1 && out[0].empty()),
                "gradwire gather: only the root rank passes output tensors");
  } else {
    TORCH_CHECK(out.size() == 1 && out[0].size() == static_cast<size_t>(n),
                "gradwire gather: the root expects one output list of ", n, " tensors");
    for (auto& x : out[0]) check_same(x, t, "gather", "an output tensor");
    flat = at::empty({n * t.numel()}, t.options());
    results = out[0];
  }
  Job j;
  j.posts.push_back([src, flat, root, c = call_opts(o.timeout)](Communicator& m) {
    return m.gather_async(ptr(src), flat.defined() ? ptr(flat) : nullptr, nbytes(src),
                          DataType::kUInt8, root, c);
  });
  if (me == root) {
    j.finish = [outs = out[0], flat, k = t.numel()]() mutable {
      for (size_t i = 0; i < outs.size(); ++i)
        outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * k, k).view(outs[i].sizes()));
    };
  }
  return submit(c10::make_intrusive<WorkGW>(OpType::GATHER, "gather", results), std::move(j));
}

WorkPtr ProcessGroupGW::scatter(Tensors& out, TensorLists& in, const c10d::ScatterOptions& o) {
  at::Tensor t = single(out, "scatter");
  const int root = static_cast<int>(o.rootRank), me = getRank(), n = getSize();
  TORCH_CHECK(root >= 0 && root < n, "gradwire scatter: bad root rank ", root);
  at::Tensor w = out_buf(t), flat;
  if (me != root) {
    TORCH_CHECK(in.empty() || (in.size() == 1 && in[0].empty()),
                "gradwire scatter: only the root rank passes input tensors");
  } else {
    TORCH_CHECK(in.size() == 1 && in[0].size() == static_cast<size_t>(n),
                "gradwire scatter: the root expects one input list of ", n, " tensors");
    for (auto& x : in[0]) check_same(x, t, "scatter", "an input tensor");
    Tensors parts;
    for (auto& x : in[0]) parts.push_back(x.reshape({-1}));
    flat = at::cat(parts);  // the library cuts one buffer into blocks
  }
  Job j;
  j.posts.push_back([flat, w, root, c = call_opts(o.timeout)](Communicator& m) {
    return m.scatter_async(flat.defined() ? ptr(flat) : nullptr, ptr(w), nbytes(w),
                           DataType::kUInt8, root, c);
  });
  if (!w.is_same(t)) j.finish = [t, w]() mutable { t.copy_(w); };
  return submit(c10::make_intrusive<WorkGW>(OpType::SCATTER, "scatter", out), std::move(j));
}

WorkPtr ProcessGroupGW::reduce_scatter(Tensors& out, TensorLists& in,
                                       const c10d::ReduceScatterOptions& o) {
  at::Tensor t = single(out, "reduce_scatter");
  TORCH_CHECK(in.size() == 1 && in[0].size() == static_cast<size_t>(getSize()),
              "gradwire reduce_scatter: expects one input list of ", getSize(), " tensors");
  for (auto& x : in[0]) check_same(x, t, "reduce_scatter", "an input tensor");
  RedPlan p = plan_reduce("reduce_scatter", t.scalar_type(), o.reduceOp);
  Tensors flat_parts;
  for (auto& x : in[0]) flat_parts.push_back(x.reshape({-1}));
  at::Tensor flat = stage(at::cat(flat_parts), p);
  at::Tensor w = p.flip_sign ? at::empty({t.numel()}, t.options().dtype(at::kByte)) : out_buf(t);
  Job j;
  j.posts.push_back([flat, w, p, c = call_opts(o.timeout)](Communicator& m) {
    return m.reduce_scatter_async(ptr(flat), ptr(w), w.numel(), p.dt, p.op, c);
  });
  if (!w.is_same(t)) j.finish = [t, w, p]() mutable { copy_back(t, w, p); };
  return submit(c10::make_intrusive<WorkGW>(OpType::REDUCE_SCATTER, "reduce_scatter", out),
                std::move(j));
}

WorkPtr ProcessGroupGW::_reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                             const c10d::ReduceScatterOptions& o) {
  check_cpu(in, "_reduce_scatter_base");
  check_cpu(out, "_reduce_scatter_base");
  TORCH_CHECK(in.numel() == out.numel() * getSize() && out.scalar_type() == in.scalar_type(),
              "gradwire _reduce_scatter_base: input must hold world size x output elements of ",
              out.scalar_type());
  RedPlan p = plan_reduce("_reduce_scatter_base", out.scalar_type(), o.reduceOp);
  at::Tensor src = stage(in, p);
  at::Tensor w =
      p.flip_sign ? at::empty({out.numel()}, out.options().dtype(at::kByte)) : out_buf(out);
  Job j;
  j.posts.push_back([src, w, p, c = call_opts(o.timeout)](Communicator& m) {
    return m.reduce_scatter_async(ptr(src), ptr(w), w.numel(), p.dt, p.op, c);
  });
  if (!w.is_same(out)) j.finish = [out, w, p]() mutable { copy_back(out, w, p); };
  return submit(c10::make_intrusive<WorkGW>(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
                                            Tensors{out}),
                std::move(j));
}

WorkPtr ProcessGroupGW::alltoall_base(at::Tensor& out, at::Tensor& in,
                                      std::vector<int64_t>& out_splits,
                                      std::vector<int64_t>& in_splits,
                                      const c10d::AllToAllOptions& o) {
  check_cpu(in, "alltoall_base");
  check_cpu(out, "alltoall_base");
  TORCH_CHECK(in.scalar_type() == out.scalar_type(), "gradwire alltoall_base: dtypes differ");
  const int n = getSize();
  // Rows along dim 0; no splits: equal parts.
  auto offsets = [&](const at::Tensor& x, std::vector<int64_t> s, const char* what) {
    const int64_t rows = x.dim() ? x.size(0) : 0;
    if (s.empty()) {
      TORCH_CHECK(rows % n == 0, "gradwire alltoall_base: ", what, " has ", rows,
                  " rows, not divisible by the world size ", n);
      s.assign(n, rows / n);
    }
    TORCH_CHECK(static_cast<int>(s.size()) == n, "gradwire alltoall_base: ", what,
                " splits must have world-size entries");
    std::vector<int64_t> off(n + 1, 0);
    for (int i = 0; i < n; ++i) off[i + 1] = off[i] + s[i];
    TORCH_CHECK(off[n] == rows, "gradwire alltoall_base: ", what, " splits sum to ", off[n],
                ", tensor has ", rows, " rows");
    return off;
  };
  const auto ioff = offsets(in, in_splits, "input"), ooff = offsets(out, out_splits, "output");
  // Byte counts and displacements of every part: one native alltoallv in the library.
  auto bytes = [](const at::Tensor& x, const std::vector<int64_t>& off) {
    const size_t row = x.dim() && x.size(0) ? nbytes(x) / static_cast<size_t>(x.size(0)) : 0;
    std::vector<size_t> v(2 * (off.size() - 1));
    for (size_t i = 0; i + 1 < off.size(); ++i) {
      v[i] = static_cast<size_t>(off[i + 1] - off[i]) * row;
      v[off.size() - 1 + i] = static_cast<size_t>(off[i]) * row;
    }
    return v;
  };
  at::Tensor src = in.contiguous(), w = out_buf(out);
  Job j;
  j.posts.push_back([src, w, sv = bytes(src, ioff), rv = bytes(w, ooff), n,
                     c = call_opts(o.timeout)](Communicator& m) {
    return m.alltoallv_async(ptr(src), sv.data(), sv.data() + n, ptr(w), rv.data(), rv.data() + n,
                             DataType::kUInt8, c);
  });
  if (!w.is_same(out)) j.finish = [out, w]() mutable { out.copy_(w); };
  return submit(c10::make_intrusive<WorkGW>(OpType::ALLTOALL_BASE, "alltoall_base", Tensors{out}),
                std::move(j));
}

WorkPtr ProcessGroupGW::barrier(const c10d::BarrierOptions& o) {
  Job j;
  j.posts.push_back([c = call_opts(o.timeout)](Communicator& m) { return m.barrier_async(c); });
  return submit(c10::make_intrusive<WorkGW>(OpType::BARRIER, "barrier", Tensors{}), std::move(j));
}

WorkPtr ProcessGroupGW::send(Tensors& ts, int dst, int tag) {
  at::Tensor t = single(ts, "send");
  TORCH_CHECK(tag >= 0, "gradwire send: tag must be >= 0, got ", tag);
  TORCH_CHECK(dst >= 0 && dst < getSize() && dst != getRank(), "gradwire send: bad peer ", dst);
  Job j;
  j.posts.push_back(p_send(t.contiguous(), dst, static_cast<uint32_t>(tag), {}));
  return submit(c10::make_intrusive<WorkGW>(OpType::SEND, "send", ts), std::move(j));
}

WorkPtr ProcessGroupGW::recv(Tensors& ts, int src, int tag) {
  at::Tensor t = single(ts, "recv");
  TORCH_CHECK(tag >= 0, "gradwire recv: tag must be >= 0, got ", tag);
  TORCH_CHECK(src >= 0 && src < getSize() && src != getRank(), "gradwire recv: bad peer ", src);
  auto work = c10::make_intrusive<WorkGW>(OpType::RECV, "recv", ts);
  work->source_ = src;
  at::Tensor w = out_buf(t);
  Job j;
  j.posts.push_back(p_recv(w, src, static_cast<uint32_t>(tag), {}));
  if (!w.is_same(t)) j.finish = [t, w]() mutable { t.copy_(w); };
  return submit(std::move(work), std::move(j));
}

WorkPtr ProcessGroupGW::recvAnysource(Tensors& ts, int tag) {
  at::Tensor t = single(ts, "recvAnysource");
  TORCH_CHECK(tag >= 0, "gradwire recvAnysource: tag must be >= 0, got ", tag);
  auto work = c10::make_intrusive<WorkGW>(OpType::RECVANYSOURCE, "recvAnysource", ts);
  at::Tensor w = out_buf(t);
  Job j;
  j.posts.push_back(p_recv(w, -1, static_cast<uint32_t>(tag), {}, &work->source_));
  if (!w.is_same(t)) j.finish = [t, w]() mutable { t.copy_(w); };
  return submit(std::move(work), std::move(j));
}

}  // namespace gw::torch
