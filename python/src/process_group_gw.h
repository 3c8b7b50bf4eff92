/// @file process_group_gw.h
/// c10d::ProcessGroup over gradwire (torch 1.13 has no public c10d::Backend for Python).
/// Each call checks its tensors on the caller's thread, turns them into an Engine Job and
/// returns a WorkGW at once; the engine thread completes the Work and its Future.
/// Thread-safety: calls are expected from one thread (as with every c10d backend: all ranks
/// must issue collectives in the same order); Works may be waited on from any thread.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "gw_torch_engine.h"

namespace gw::torch {

/// A Work whose Future is completed with the op's output tensors.
class WorkGW final : public c10d::Work {
 public:
  WorkGW(c10d::OpType type, const char* op, std::vector<at::Tensor> outputs);
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  int sourceRank() const override { return source_; }
  /// From the Future, which completes first: a caller seeing "done" can read its value.
  bool isCompleted() override { return future_->completed(); }
  /// Looks for completion briefly before sleeping: small ops finish within microseconds.
  bool wait(std::chrono::milliseconds timeout) override;
  /// Engine thread: complete the Future, then the Work (an error names the op).
  void complete(const Status& st);

  int source_ = -1;    ///< written by the engine thread before complete()
  bool spin_ = false;  ///< wait() looks before sleeping (Engine::spin())
  /// A wait() that times out aborts the engine's communicator (while it lives): the peers
  /// blocked with this rank learn at once, as NCCL's watchdog aborts a timed-out communicator.
  std::weak_ptr<Engine> engine_;

 private:
  const char* op_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupGW final : public c10d::ProcessGroup {
 public:
  /// Rendezvous through `store`; `spec` empty: GW_TRANSPORT, else "tcp". Throws on failure.
  ProcessGroupGW(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                 std::chrono::milliseconds timeout, std::string spec);
  /// The survivors' group of a shrink (ProcessGroupGW::shrink).
  explicit ProcessGroupGW(std::shared_ptr<Engine> engine);
  const std::string getBackendName() const override { return "gradwire"; }
  /// Communicator::shrink on every surviving rank: a new group of the survivors over the same
  /// connections; this one refuses further calls. Throws what shrink returns.
  c10::intrusive_ptr<ProcessGroupGW> shrink(const std::vector<int>& exclude);
  /// Rank r's rank in the group this one was shrunk from (r for a created group).
  int parent_rank(int r) { return engine_->group().parent_rank(r); }
  const std::string& transport_name() const { return engine_->transport_name(); }
  /// Abort (any thread): every call in flight here and on the peers fails, naming this rank.
  void abort(const std::string& reason) { engine_->abort(reason); }
  /// The rank a failed call blamed (dead, stopped or aborting peer), -1 if none or no error.
  int failed_rank() const { return engine_->error().rank(); }

  using Tensors = std::vector<at::Tensor>;
  using TensorLists = std::vector<std::vector<at::Tensor>>;
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  WorkPtr broadcast(Tensors& t, const c10d::BroadcastOptions& o) override;
  WorkPtr allreduce(Tensors& t, const c10d::AllreduceOptions& o) override;
  WorkPtr allreduce_coalesced(Tensors& t, const c10d::AllreduceCoalescedOptions& o) override;
  WorkPtr reduce(Tensors& t, const c10d::ReduceOptions& o) override;
  WorkPtr allgather(TensorLists& out, Tensors& in, const c10d::AllgatherOptions& o) override;
  WorkPtr _allgather_base(at::Tensor& out, at::Tensor& in,
                          const c10d::AllgatherOptions& o) override;
  WorkPtr allgather_coalesced(TensorLists& out, Tensors& in,
                              const c10d::AllgatherOptions& o) override;
  WorkPtr gather(TensorLists& out, Tensors& in, const c10d::GatherOptions& o) override;
  WorkPtr scatter(Tensors& out, TensorLists& in, const c10d::ScatterOptions& o) override;
  WorkPtr reduce_scatter(Tensors& out, TensorLists& in,
                         const c10d::ReduceScatterOptions& o) override;
  WorkPtr _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                               const c10d::ReduceScatterOptions& o) override;
  WorkPtr alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                        std::vector<int64_t>& in_splits, const c10d::AllToAllOptions& o) override;
  WorkPtr alltoall(Tensors& out, Tensors& in, const c10d::AllToAllOptions& o) override;
  WorkPtr barrier(const c10d::BarrierOptions& o) override;
  /// gloo's monitored barrier: rank 0 names the ranks that did not arrive within the timeout.
  void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all) override;
  WorkPtr send(Tensors& t, int dst, int tag) override;
  WorkPtr recv(Tensors& t, int src, int tag) override;
  WorkPtr recvAnysource(Tensors& t, int tag) override;

 private:
  c10::intrusive_ptr<WorkGW> submit(c10::intrusive_ptr<WorkGW> w, Job job);
  WorkPtr allreduce_sparse(at::Tensor& t, const c10d::AllreduceOptions& o);
  /// Tag of the point-to-point messages of one alltoall of lists or monitored barrier: the same on
  /// every rank (they are called in the same order), apart from user tags (top bit set).
  uint32_t internal_tag() { return 0x80000000u | (internal_seq_++ & 0x7FFFFFFFu); }

  std::shared_ptr<Engine> engine_;
  uint32_t internal_seq_ = 0;
};

}  // namespace gw::torch
