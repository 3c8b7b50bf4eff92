/// @file gw_torch_engine.h
/// The PyTorch backend's communication thread, free of torch types (so that only the two
/// files that bind to torch pay for its headers). The Engine owns the Group and Communicator;
/// callers submit Jobs from any thread; the thread posts them in submission order and drives
/// progress, blocking in the transport's wait (no busy loop), then runs each Job's callbacks.
/// Thread-safety: submit() from any thread; everything else runs on the engine's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gw_coll.h"
#include "gw_group.h"
#include "gw_store.h"

namespace gw::torch {

/// One torch call: `posts` start one collective or point-to-point request each (the engine
/// issues them in order as slots free up; a later Job's posts never overtake them, so every
/// rank starts collectives in the same order); `check` runs after all succeeded and may turn
/// the job into an error (a message shorter than expected); `finish` runs after all succeeded
/// (copy-out); `done` runs last, with the first error or OK.
struct Job {
  using Post = std::function<Result<CollHandle>(Communicator&)>;
  std::vector<Post> posts;
  std::function<Status()> check;
  std::function<void()> finish;
  std::function<void(const Status&)> done;
};

class Engine {
 public:
  /// Open the transport by `spec` ("tcp", "dpdk:vdev=...": "role=auto" becomes server on
  /// rank 0, client elsewhere), connect the group through `store` before `timeout`, start the
  /// thread. @return the Transport/Group/Communicator errors.
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<Store> store, int rank, int size,
                                                Nanos timeout, std::string spec);
  /// Communicator::shrink: stops this engine's thread (what is queued or running fails),
  /// agrees with the other survivors and returns the engine of their communicator. This
  /// engine stays, refusing new jobs, until its process group is destroyed.
  /// @return as Communicator::shrink.
  Result<std::unique_ptr<Engine>> shrink(std::span<const int> exclude);
  /// The communicator's group (rank(), size(), parent_rank()).
  Group& group() { return comm_->group(); }
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queue a job; its callbacks run on the engine's thread.
  void submit(Job job);
  const std::string& transport_name() const { return transport_name_; }
  /// Abort the communicator (any thread): what runs fails at once, every peer's within
  /// ~200 ms, naming this rank (Communicator::abort).
  void abort(std::string_view reason) { comm_->abort(reason); }
  /// OK, or the first error a job failed with; its rank() is the culprit (any thread).
  Status error() const {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }
  /// Whether waiters may look for completion briefly before sleeping: only when the ranks
  /// (counted as if all were on this host) do not outnumber the CPUs.
  bool spin() const { return spin_; }

 private:
  struct Active {
    Job job;
    size_t next = 0;      // next post to issue
    size_t issued = 0;    // posts the communicator took
    int outstanding = 0;  // handles in flight
    Status status;
  };
  struct InFlight {
    CollHandle h;
    Active* job;
  };

  Engine() = default;
  void start();
  void stop_thread(std::string why);
  void run();
  void idle_spin();
  /// Issue what the free slots allow, oldest job first; a job never overtakes an earlier one.
  void post_pending(int& free);
  void complete(Active& a, Status st);
  void retire_finished();

  // Jobs that failed after posting (their lambdas hold the tensors): kept until the Group is
  // gone, since its transport may still write into their receive buffers (gw_coll.h). Declared
  // first, so destroyed last; the destructor also resets the Group first.
  std::vector<Job> kept_;
  std::unique_ptr<Group> group_;
  std::unique_ptr<Communicator> comm_;
  std::string transport_name_;
  Nanos timeout_{0};
  bool spin_ = false;

  mutable std::mutex mu_;  // guards queue_, stop_ and error_
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::atomic<bool> queued_{false};  // a hint read without mu_ while the thread idles briefly
  bool stop_ = false;
  std::string stop_why_ = "process group destroyed";
  Status error_;

  // Engine thread only.
  std::deque<std::unique_ptr<Active>> active_;
  std::vector<InFlight> inflight_;
  std::thread thread_;
};

}  // namespace gw::torch
