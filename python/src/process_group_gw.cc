// ProcessGroupGW setup: the c10d Store seen as a gradwire Store, the Work, the constructor and
// the Python module. The ops are in pg_ops.cc.
#include "process_group_gw.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace gw::torch {
namespace {

/// gradwire's Store interface over the c10d Store torch hands the backend (a PrefixStore over
/// the job's TCPStore): the rendezvous needs no server of its own.
class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> s) : s_(std::move(s)) {}

  Status set(std::string_view key, std::string_view value) override {
    return guard("set", key, [&] {
      s_->set(std::string(key), std::vector<uint8_t>(value.begin(), value.end()));
    });
  }
  Result<std::string> get(std::string_view key, Nanos timeout) override {
    std::string out;
    Status st = guard("get", key, [&] {
      s_->wait({std::string(key)}, ms(timeout));
      auto v = s_->get(std::string(key));
      out.assign(v.begin(), v.end());
    });
    if (!st.ok()) return st;
    return out;
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    int64_t v = 0;
    Status st = guard("add", key, [&] { v = s_->add(std::string(key), delta); });
    if (!st.ok()) return st;
    return v;
  }
  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    return guard("wait", keys.empty() ? "" : keys[0], [&] {
      s_->wait(std::vector<std::string>(keys.begin(), keys.end()), ms(timeout));
    });
  }
  Result<bool> check(std::span<const std::string> keys) override {
    bool v = false;
    Status st = guard("check", keys.empty() ? "" : keys[0],
                      [&] { v = s_->check(std::vector<std::string>(keys.begin(), keys.end())); });
    if (!st.ok()) return st;
    return v;
  }

 private:
  static std::chrono::milliseconds ms(Nanos t) {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(t));
  }
  template <class F>
  static Status guard(const char* what, std::string_view key, F&& f) {
    try {
      f();
      return Status();
    } catch (const std::exception& e) {
      std::string m = e.what();
      const Code c =
          m.find("imeout") != std::string::npos || m.find("timed out") != std::string::npos
              ? Code::kTimeout
              : Code::kUnavailable;
      return Status(c, std::string("c10d store ") + what + " '" + std::string(key) + "': " + m);
    }
  }
  c10::intrusive_ptr<c10d::Store> s_;
};

}  // namespace

WorkGW::WorkGW(c10d::OpType type, const char* op, std::vector<at::Tensor> outputs)
    : c10d::Work(-1, type),
      op_(op),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool WorkGW::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (spin_ && !future_->completed() && std::chrono::steady_clock::now() < end)
    std::this_thread::yield();
  try {
    return c10d::Work::wait(timeout);
  } catch (...) {
    if (!isCompleted()) {  // timed out (not the op's own error): the peers must learn too
      if (auto e = engine_.lock())
        e->abort(std::string("Work.wait() on ") + op_ + " timed out after " +
                 std::to_string(timeout.count()) + " ms");
    }
    throw;
  }
}

void WorkGW::complete(const Status& st) {
  if (st.ok()) {
    future_->markCompleted(c10::IValue(outputs_));
    finish();
    return;
  }
  // The culprit is also a field: ProcessGroupGW.failed_rank() (gradwire.failed_rank()).
  std::string rank = st.rank() >= 0 ? " [failed rank " + std::to_string(st.rank()) + "]" : "";
  // "Timed out" is the phrase users (and PyTorch's suite) look for in gloo's and NCCL's texts.
  const char* what = st.code() == Code::kTimeout ? ": Timed out waiting for its peers: " : ": ";
  auto e = std::make_exception_ptr(
      std::runtime_error(std::string("gradwire ") + op_ + what + st.to_string() + rank));
  future_->setError(e);
  finish(e);
}

ProcessGroupGW::ProcessGroupGW(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                               std::chrono::milliseconds timeout, std::string spec)
    : c10d::ProcessGroup(rank, size) {
  if (spec.empty()) {
    const char* env = std::getenv("GW_TRANSPORT");
    spec = env && *env ? env : "tcp";
  }
  auto e = Engine::create(std::make_shared<C10dStore>(store), rank, size, timeout, spec);
  TORCH_CHECK(e.ok(), "gradwire backend on rank ", rank, " of ", size, ": ",
              e.status().to_string());
  engine_ = std::move(*e);
}

ProcessGroupGW::ProcessGroupGW(std::shared_ptr<Engine> engine)
    : c10d::ProcessGroup(engine->group().rank(), engine->group().size()),
      engine_(std::move(engine)) {}

c10::intrusive_ptr<ProcessGroupGW> ProcessGroupGW::shrink(const std::vector<int>& exclude) {
  auto e = engine_->shrink(exclude);
  TORCH_CHECK(e.ok(), "gradwire shrink on rank ", getRank(), " of ", getSize(), ": ",
              e.status().to_string(),
              e.status().code() == Code::kAborted
                  ? " [excluded: the other ranks went on without this one]"
                  : "");
  return c10::make_intrusive<ProcessGroupGW>(std::shared_ptr<Engine>(std::move(*e)));
}

c10::intrusive_ptr<WorkGW> ProcessGroupGW::submit(c10::intrusive_ptr<WorkGW> w, Job job) {
  w->spin_ = engine_->spin();
  w->engine_ = engine_;
  job.done = [w](const Status& st) { w->complete(st); };
  engine_->submit(std::move(job));
  return w;
}

}  // namespace gw::torch

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  using gw::torch::ProcessGroupGW;
  py::module_::import("torch.distributed");  // registers c10d's Store and ProcessGroup types
  m.doc() = "gradwire's c10d ProcessGroup (use: import gradwire; init_process_group('gradwire'))";
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::duration<float> timeout,
         const std::string& transport) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
        return c10::make_intrusive<ProcessGroupGW>(store, rank, size, ms, transport);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("transport") = "", py::call_guard<py::gil_scoped_release>(),
      "Make the process group (torch.distributed calls it through register_backend). "
      "transport: a gradwire spec (\"tcp\", \"dpdk:vdev=net_memif0,role=auto,socket=...\"); "
      "empty: $GW_TRANSPORT, else tcp.");
  auto gw_pg = [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
    auto* g = dynamic_cast<ProcessGroupGW*>(pg.get());
    TORCH_CHECK(g, "not a gradwire process group: ", pg->getBackendName());
    return g;
  };
  m.def(
      "failed_rank",
      [gw_pg](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        return gw_pg(pg)->failed_rank();
      },
      py::arg("group"),
      "The rank the group's first failed call blamed (a dead, stopped or aborting peer); -1 "
      "when none was named or nothing failed.");
  m.def(
      "shrink",
      [gw_pg](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, const std::vector<int>& exclude)
          -> c10::intrusive_ptr<c10d::ProcessGroup> { return gw_pg(pg)->shrink(exclude); },
      py::arg("group"), py::arg("exclude") = std::vector<int>{},
      py::call_guard<py::gil_scoped_release>(),
      "Communicator::shrink: every surviving rank calls it after a failure; returns the "
      "survivors' process group (ranks renumbered in order) over the same connections.");
  m.def(
      "parent_ranks",
      [gw_pg](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        std::vector<int> v;
        auto* g = gw_pg(pg);
        for (int r = 0; r < g->getSize(); ++r) v.push_back(g->parent_rank(r));
        return v;
      },
      py::arg("group"), "Each rank's rank in the group this one was shrunk from.");
  m.def(
      "abort",
      [gw_pg](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, const std::string& reason) {
        gw_pg(pg)->abort(reason);
      },
      py::arg("group"), py::arg("reason") = "", py::call_guard<py::gil_scoped_release>(),
      "Abort the group from any thread: calls in flight here and on every peer fail within "
      "~200 ms, naming this rank. Destroy the group afterwards.");
}
