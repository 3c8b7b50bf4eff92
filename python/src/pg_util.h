/// @file pg_util.h
/// Helpers shared by the ProcessGroupGW op files: tensor checks, staging buffers, the Engine
/// posts of point-to-point messages, and how a torch reduction maps onto gradwire's.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <memory>
#include <string>
#include <vector>

#include "gw_torch_engine.h"

namespace gw::torch {

using Post = Job::Post;

/// How a reduction runs in the library. int8 has no kernel: sum/product wrap identically as
/// uint8 (two's complement), and min/max order like uint8 once the sign bit is flipped.
struct RedPlan {
  DataType dt = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool flip_sign = false;
};

inline void check_cpu(const at::Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(t.device().is_cpu(), "gradwire ", op, ": tensor on ", t.device(),
                              ": only CPU tensors are supported (device buffers are the CUDA "
                              "driver's, not yet wired to this backend)");
}

inline at::Tensor single(std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "gradwire ", op, ": expects one tensor per rank, got ", ts.size());
  check_cpu(ts[0], op);
  return ts[0];
}

inline CallOptions call_opts(std::chrono::milliseconds t) {
  CallOptions c;
  if (t.count() > 0) c.timeout = t;
  return c;
}

/// The buffer an in-place op works on: the tensor itself when it is contiguous (and needs no
/// sign flip), else a contiguous copy that `copy_back` returns to it.
inline at::Tensor stage(const at::Tensor& t, const RedPlan& p) {
  if (p.flip_sign) return t.contiguous().view(at::kByte).bitwise_xor(0x80);
  return t.is_contiguous() ? t : t.contiguous();
}
inline void copy_back(at::Tensor& t, const at::Tensor& w, const RedPlan& p) {
  if (p.flip_sign) {
    t.copy_(w.bitwise_xor(0x80).view(at::kChar).view(t.sizes()));
  } else if (!w.is_same(t)) {
    t.copy_(w);
  }
}
/// A contiguous buffer to receive into (the tensor itself if it is contiguous).
inline at::Tensor out_buf(const at::Tensor& t) {
  return t.is_contiguous() ? t : at::empty(t.sizes(), t.options());
}

inline size_t nbytes(const at::Tensor& t) { return t.numel() * t.element_size(); }
inline void* ptr(const at::Tensor& t) { return t.data_ptr(); }

inline Post p_send(at::Tensor t, int peer, uint32_t tag, CallOptions c) {
  return
      [t, peer, tag, c](Communicator& m) { return m.send_async(ptr(t), nbytes(t), peer, tag, c); };
}
inline Post p_recv(at::Tensor t, int peer, uint32_t tag, CallOptions c, int* src = nullptr) {
  return [t, peer, tag, c, src](Communicator& m) {
    return m.recv_async(ptr(t), nbytes(t), peer, tag, src, nullptr, c);
  };
}

/// Received lengths of one job's receives, checked against what each tensor expects (a peer
/// that sent fewer bytes than this rank's tensor holds is a size mismatch, not a short read).
struct RecvSizes {
  std::vector<size_t> got, want;
  std::vector<int> peer;
};
inline Post p_recv_sized(at::Tensor t, int peer, uint32_t tag, CallOptions c,
                         std::shared_ptr<RecvSizes> sz) {
  const size_t i = sz->got.size();
  sz->got.push_back(0);
  sz->want.push_back(nbytes(t));
  sz->peer.push_back(peer);
  return [t, peer, tag, c, sz, i](Communicator& m) {
    return m.recv_async(ptr(t), nbytes(t), peer, tag, nullptr, &sz->got[i], c);
  };
}
/// Job::check of those receives: InvalidArgument naming the op, the peer and both sizes.
inline std::function<Status()> check_sizes(std::shared_ptr<RecvSizes> sz, const char* op) {
  return [sz, op]() {
    for (size_t i = 0; i < sz->got.size(); ++i)
      if (sz->got[i] != sz->want[i])
        return Status(Code::kInvalidArgument,
                      std::string("gradwire ") + op + ": rank " + std::to_string(sz->peer[i]) +
                          " sent " + std::to_string(sz->got[i]) +
                          " bytes, this rank's tensor holds " + std::to_string(sz->want[i]) +
                          " (sizes must match across ranks)");
    return Status();
  };
}

inline void check_same(const at::Tensor& a, const at::Tensor& ref, const char* op,
                       const char* what) {
  check_cpu(a, op);
  TORCH_CHECK(a.numel() == ref.numel() && a.scalar_type() == ref.scalar_type(), "gradwire ", op,
              ": ", what, " has ", a.numel(), " elements of ", a.scalar_type(), ", expected ",
              ref.numel(), " of ", ref.scalar_type());
}

/// How a torch reduction over `st` runs in the library; throws (NotImplemented) for what has
/// no kernel.
RedPlan plan_reduce(const char* op, at::ScalarType st, const c10d::ReduceOp& rop);

}  // namespace gw::torch
