// The ops gloo has beyond the basic set: allgather_coalesced, all-to-all of tensor lists,
// sparse (COO) allreduce and the monitored barrier (gloo's semantics and error texts, which
// PyTorch's suite matches).
#include <chrono>
#include <string>

#include "pg_util.h"
#include "process_group_gw.h"

namespace gw::torch {

using c10d::OpType;
using WorkPtr = ProcessGroupGW::WorkPtr;

namespace {

/// Every tensor's bytes, flattened into one uint8 buffer (in list order).
at::Tensor pack(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> parts;
  for (auto& t : ts) parts.push_back(t.contiguous().view({-1}).view(at::kByte));
  return parts.empty() ? at::empty({0}, at::kByte) : at::cat(parts);
}

/// Waits for a Work without a deadline of its own: the requests it holds carry theirs.
Status wait_status(const c10::intrusive_ptr<c10d::Work>& w) {
  try {
    w->wait();
    return Status();
  } catch (const std::exception& e) {
    return Status(Code::kUnavailable, e.what());
  }
}

}  // namespace

WorkPtr ProcessGroupGW::allgather_coalesced(TensorLists& out, Tensors& in,
                                            const c10d::AllgatherOptions& o) {
  const size_t n = static_cast<size_t>(getSize());
  TORCH_CHECK(out.size() == n, "gradwire allgather_coalesced: expects ", n,
              " output lists (one per rank), got ", out.size());
  for (auto& t : in) check_cpu(t, "allgather_coalesced");
  for (auto& list : out) {
    TORCH_CHECK(list.size() == in.size(), "gradwire allgather_coalesced: each output list must ",
                "hold ", in.size(), " tensors (one per input), got ", list.size());
    for (size_t i = 0; i < in.size(); ++i)
      check_same(list[i], in[i], "allgather_coalesced", "an output tensor");
  }
  at::Tensor src = pack(in);
  at::Tensor flat = at::empty({static_cast<int64_t>(n) * src.numel()}, src.options());
  Job j;
  j.posts.push_back([src, flat, c = call_opts(o.timeout)](Communicator& m) {
    return m.allgather_async(ptr(src), ptr(flat), nbytes(src), DataType::kUInt8, c);
  });
  j.finish = [out, flat, per = src.numel()]() mutable {
    for (size_t r = 0; r < out.size(); ++r) {
      int64_t at = static_cast<int64_t>(r) * per;
      for (auto& t : out[r]) {
        const int64_t b = static_cast<int64_t>(nbytes(t));
        t.copy_(flat.narrow(0, at, b).view(t.scalar_type()).view(t.sizes()));
        at += b;
      }
    }
  };
  Tensors results;
  for (auto& list : out) results.insert(results.end(), list.begin(), list.end());
  return submit(
      c10::make_intrusive<WorkGW>(OpType::ALLGATHER_COALESCED, "allgather_coalesced", results),
      std::move(j));
}

WorkPtr ProcessGroupGW::alltoall(Tensors& out, Tensors& in, const c10d::AllToAllOptions& o) {
  const int n = getSize(), me = getRank();
  TORCH_CHECK(static_cast<int>(out.size()) == n && static_cast<int>(in.size()) == n,
              "gradwire alltoall: expects ", n, " input and ", n, " output tensors, got ",
              in.size(), " and ", out.size());
  for (int i = 0; i < n; ++i) {
    check_cpu(in[i], "alltoall");
    check_cpu(out[i], "alltoall");
    TORCH_CHECK(
        in[i].scalar_type() == in[0].scalar_type() && out[i].scalar_type() == in[0].scalar_type(),
        "gradwire alltoall: every tensor must have one dtype (", in[0].scalar_type(), ")");
  }
  TORCH_CHECK(out[me].numel() == in[me].numel(), "gradwire alltoall: output ", me, " has ",
              out[me].numel(), " elements, this rank's own input ", in[me].numel());
  const uint32_t tag = internal_tag();
  const CallOptions c = call_opts(o.timeout);
  auto sizes = std::make_shared<RecvSizes>();
  Tensors ws;
  for (auto& t : out) ws.push_back(out_buf(t));
  Job j;
  // Pairwise exchange: step i sends to rank me+i and receives from me-i.
  for (int i = 1; i < n; ++i) {
    const int to = (me + i) % n, from = (me - i + n) % n;
    j.posts.push_back(p_send(in[to].contiguous(), to, tag, c));
    j.posts.push_back(p_recv_sized(ws[from], from, tag, c, sizes));
  }
  j.check = check_sizes(sizes, "alltoall");
  j.finish = [out, ws, mine = in[me], me]() mutable {
    out[me].copy_(mine.reshape(out[me].sizes()));
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i) != me && !ws[i].is_same(out[i])) out[i].copy_(ws[i]);
  };
  return submit(c10::make_intrusive<WorkGW>(OpType::ALLTOALL, "alltoall", out), std::move(j));
}

// Sparse COO allreduce as gloo does it: every rank's indices and values are gathered and
// summed locally. Phase 1 (shapes and counts) completes on the caller's thread, so that the
// padded phase 2 can be sized and every rank still starts its calls in one order.
WorkPtr ProcessGroupGW::allreduce_sparse(at::Tensor& t, const c10d::AllreduceOptions& o) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      static_cast<c10d::ReduceOp::RedOpType>(o.reduceOp) == c10d::ReduceOp::SUM,
      "gradwire allreduce: sparse tensors reduce with SUM only");
  constexpr int kMaxDims = 16, kMeta = 4 + kMaxDims;
  at::Tensor in = t.coalesce();
  TORCH_CHECK(in.dim() <= kMaxDims, "gradwire allreduce: sparse tensor of ", in.dim(),
              " dimensions (at most ", kMaxDims, ")");
  const int n = getSize();
  const CallOptions c = call_opts(o.timeout);
  at::Tensor meta = at::zeros({kMeta}, at::kLong), all = at::empty({n * kMeta}, at::kLong);
  auto* m = meta.data_ptr<int64_t>();
  m[0] = in.sparse_dim();
  m[1] = in.dense_dim();
  m[2] = in._nnz();
  m[3] = in.dim();
  for (int d = 0; d < in.dim(); ++d) m[4 + d] = in.size(d);
  Job j1;
  j1.posts.push_back([meta, all, c](Communicator& cm) {
    return cm.allgather_async(ptr(meta), ptr(all), nbytes(meta), DataType::kUInt8, c);
  });
  Tensors none;
  Status st = wait_status(
      submit(c10::make_intrusive<WorkGW>(OpType::ALLREDUCE, "allreduce (sparse shapes)", none),
             std::move(j1)));
  TORCH_CHECK(st.ok(), st.message());
  auto* a = all.data_ptr<int64_t>();
  int64_t max_nnz = 0;
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < kMeta; ++k)
      TORCH_CHECK(k == 2 || a[r * kMeta + k] == m[k], "gradwire allreduce: sparse tensors ",
                  "differ across ranks (rank ", r, " has another shape or sparse/dense split)");
    max_nnz = std::max(max_nnz, a[r * kMeta + 2]);
  }
  // Padded to the largest count; each rank's real count is in its metadata.
  auto vshape = in.values().sizes().vec();
  vshape[0] = max_nnz;
  at::Tensor idx = at::zeros({in.sparse_dim(), max_nnz}, at::kLong);
  at::Tensor val = at::zeros(vshape, in.values().options());
  idx.narrow(1, 0, in._nnz()).copy_(in.indices());
  val.narrow(0, 0, in._nnz()).copy_(in.values());
  at::Tensor all_idx = at::empty({n * idx.numel()}, at::kLong);
  at::Tensor all_val = at::empty({n * val.numel()}, val.options());
  Job j;
  j.posts.push_back([idx, all_idx, c](Communicator& cm) {
    return cm.allgather_async(ptr(idx), ptr(all_idx), nbytes(idx), DataType::kUInt8, c);
  });
  j.posts.push_back([val, all_val, c](Communicator& cm) {
    return cm.allgather_async(ptr(val), ptr(all_val), nbytes(val), DataType::kUInt8, c);
  });
  j.finish = [t, in, all, all_idx, all_val, idx, val, n]() mutable {
    at::Tensor sum;
    for (int r = 0; r < n; ++r) {
      const int64_t nnz = all.data_ptr<int64_t>()[r * kMeta + 2];
      at::Tensor ri = all_idx.narrow(0, r * idx.numel(), idx.numel()).view(idx.sizes());
      at::Tensor rv = all_val.narrow(0, r * val.numel(), val.numel()).view(val.sizes());
      at::Tensor s = at::sparse_coo_tensor(ri.narrow(1, 0, nnz), rv.narrow(0, 0, nnz), in.sizes(),
                                           in.options());
      sum = r == 0 ? s : sum + s;
    }
    t.copy_(sum.coalesce());
  };
  return submit(c10::make_intrusive<WorkGW>(OpType::ALLREDUCE, "allreduce", Tensors{t}),
                std::move(j));
}

// gloo's protocol: every other rank sends to rank 0 and waits for its reply; rank 0 waits for
// each within the timeout, names the first that did not arrive (or, with wait_all, all of
// them), and replies only when all arrived.
void ProcessGroupGW::monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all) {
  const int me = getRank(), n = getSize();
  const uint32_t tag = internal_tag();
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout);
  at::Tensor token = at::zeros({1}, at::kByte);
  if (me != 0) {
    Job j;
    j.posts.push_back(p_send(token, 0, tag, {}));
    j.posts.push_back(p_recv(token.clone(), 0, tag, {}));
    Status st = wait_status(
        submit(c10::make_intrusive<WorkGW>(OpType::BARRIER, "monitored_barrier", Tensors{}),
               std::move(j)));
    TORCH_CHECK(st.ok(), "Rank ", me,
                " successfully reached monitoredBarrier, but received errors while waiting for "
                "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n Original "
                "exception: \n",
                st.message());
    return;
  }
  TORCH_CHECK(timeout.count() > 0, "Rank 0 timed out in monitoredBarrier after ", timeout.count(),
              " ms.");
  // One job per peer, so that each arrival is seen on its own; all share one deadline.
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (int p = 1; p < n; ++p) {
    Job j;
    j.posts.push_back(p_recv(at::zeros({1}, at::kByte), p, tag, call_opts(timeout)));
    works.push_back(
        submit(c10::make_intrusive<WorkGW>(OpType::BARRIER, "monitored_barrier", Tensors{}),
               std::move(j)));
  }
  std::string failed;
  int first = -1;
  for (int p = 1; p < n; ++p) {
    if (wait_status(works[p - 1]).ok()) continue;
    if (first < 0) first = p;
    failed += (failed.empty() ? "" : ", ") + std::to_string(p);
  }
  TORCH_CHECK(first < 0 || wait_all, "Rank ", first, " failed to pass monitoredBarrier in ",
              timeout.count(), " ms");
  TORCH_CHECK(first < 0, "Ranks ", failed, " failed to pass monitoredBarrier in ", timeout.count(),
              " ms");
  Job j;
  for (int p = 1; p < n; ++p) j.posts.push_back(p_send(token, p, tag, {}));
  Status st = wait_status(submit(
      c10::make_intrusive<WorkGW>(OpType::BARRIER, "monitored_barrier", Tensors{}), std::move(j)));
  TORCH_CHECK(st.ok(),
              "gradwire monitored_barrier: rank 0 could not release the others: ", st.message());
}

}  // namespace gw::torch
