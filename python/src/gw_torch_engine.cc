// The backend's communication thread: posts jobs in order, waits on the transport, completes
// them. See gw_torch_engine.h.
#include "gw_torch_engine.h"

#include <algorithm>

namespace gw::torch {
namespace {

// How long the thread blocks on one request before it looks for new jobs and sweeps the
// others: bounds the delay of a job submitted while an earlier one is still running.
constexpr Nanos kSlice = Nanos(500'000);
constexpr Nanos kIdleSpin = Nanos(50'000);

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<Store> store, int rank, int size,
                                               Nanos timeout, std::string spec) {
  // memif needs one server and one client; "auto" decides by group rank, which every launcher
  // (torchrun, torch.multiprocessing, a bare script) gives the backend.
  if (auto at = spec.find("role=auto"); at != std::string::npos)
    spec.replace(at, 9, rank == 0 ? "role=server" : "role=client");
  auto t = Transport::open(spec);
  if (!t.ok()) return t.status().with_context("gradwire backend: transport '" + spec + "'");
  std::unique_ptr<Engine> e(new Engine());
  e->transport_name_ = (*t)->properties().name;
  auto g = Group::create(std::move(store), std::move(*t), rank, size, timeout, "gw");
  if (!g.ok()) return g.status().with_context("gradwire backend: rendezvous");
  e->group_ = std::move(*g);
  CommOptions co;
  co.timeout = timeout;
  auto c = Communicator::create(*e->group_, co);
  if (!c.ok()) return c.status();
  e->comm_ = std::move(*c);
  e->timeout_ = timeout;
  e->start();
  return e;
}

void Engine::start() {
  spin_ = comm_->size() <= static_cast<int>(std::thread::hardware_concurrency());
  thread_ = std::thread([this] { run(); });
}

void Engine::stop_thread(std::string why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stop_) stop_why_ = std::move(why);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<Engine>> Engine::shrink(std::span<const int> exclude) {
  stop_thread("the process group was shrunk (gradwire.shrink): use the new one");
  // The thread is gone: this one drives the communicator now.
  GW_ASSIGN_OR_RETURN(auto c, comm_->shrink(exclude));
  std::unique_ptr<Engine> e(new Engine());
  e->transport_name_ = transport_name_;
  e->timeout_ = timeout_;
  e->comm_ = std::move(c);  // owns its group
  e->start();
  return e;
}

Engine::~Engine() {
  stop_thread("process group destroyed");
  comm_.reset();   // before its Group
  group_.reset();  // then the tensors of failed jobs (kept_) may go
}

void Engine::submit(Job job) {
  {
    std::unique_lock<std::mutex> l(mu_);
    if (stop_) {  // shrunk: nothing would run it
      Status st(Code::kAborted, "gradwire backend: " + stop_why_);
      l.unlock();
      if (job.done) job.done(st);
      return;
    }
    queue_.push_back(std::move(job));
    queued_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
}

void Engine::complete(Active& a, Status st) {
  if (st.ok()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (error_.ok()) error_ = st;
  }
  if (a.status.ok()) a.status = std::move(st);
}

void Engine::post_pending(int& free) {
  for (auto& ap : active_) {
    Active& a = *ap;
    while (a.next < a.job.posts.size() && free > 0) {
      auto r = a.job.posts[a.next++](*comm_);
      if (!r.ok()) {
        complete(a, r.status());
        a.next = a.job.posts.size();  // the rest would only fail the same way
        break;
      }
      inflight_.push_back({*r, &a});
      ++a.issued;
      ++a.outstanding;
      --free;
    }
    if (a.next < a.job.posts.size()) return;  // later jobs must not overtake this one
  }
}

void Engine::retire_finished() {
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = **it;
    if (a.next < a.job.posts.size() || a.outstanding > 0) {
      ++it;
      continue;
    }
    if (a.status.ok() && a.job.check) a.status = a.job.check();
    if (a.status.ok() && a.job.finish) a.job.finish();
    if (a.job.done) a.job.done(a.status);
    // After a break a job's posts fail at once (nothing issued), so kept_ grows by the jobs
    // that were running when the communicator broke, not by every later call.
    if (!a.status.ok() && a.issued > 0) kept_.push_back(std::move(a.job));
    it = active_.erase(it);
  }
}

void Engine::idle_spin() {
  // Back-to-back calls (a training step's buckets, small allreduces) arrive within
  // microseconds: looking for them briefly spares a sleep and a wake-up on each side.
  if (!spin_) return;
  const auto end = Clock::now() + kIdleSpin;
  while (!queued_.load(std::memory_order_acquire) && Clock::now() < end) std::this_thread::yield();
}

void Engine::run() {
  for (;;) {
    {
      if (active_.empty()) idle_spin();
      std::unique_lock<std::mutex> l(mu_);
      if (active_.empty()) cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      queued_.store(false, std::memory_order_relaxed);
      if (stop_) break;
      while (!queue_.empty()) {
        active_.push_back(std::make_unique<Active>(Active{std::move(queue_.front())}));
        queue_.pop_front();
      }
    }
    int free = Communicator::kMaxInFlight - static_cast<int>(inflight_.size());
    post_pending(free);
    retire_finished();
    if (inflight_.empty()) continue;

    // Block on the oldest request, then sweep the rest without blocking.
    bool first = true;
    for (size_t i = 0; i < inflight_.size();) {
      InFlight f = inflight_[i];
      Status st;
      bool finished = true;
      if (first) {
        first = false;
        st = comm_->wait(f.h, kSlice);
        // Timeout from wait() is either "still running" (the handle is still known) or the
        // collective's own deadline (it is finished, with that error).
        if (st.code() == Code::kTimeout) finished = !comm_->test(f.h).ok();
      } else {
        auto r = comm_->test(f.h);
        if (r.ok() && !*r) finished = false;
        if (r.ok() && *r) st = comm_->wait(f.h, Nanos(0));
        if (!r.ok()) st = r.status();
      }
      if (!finished) {
        ++i;
        continue;
      }
      complete(*f.job, st);
      --f.job->outstanding;
      inflight_.erase(inflight_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    retire_finished();
  }
  // Stopping: what is still queued or running fails rather than hanging its waiters.
  std::deque<Job> left;
  Status gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    left.swap(queue_);
    gone = Status(Code::kUnavailable, "gradwire backend: " + stop_why_);
  }
  for (auto& a : active_) {
    if (a->job.done) a->job.done(gone);
    if (a->issued > 0) kept_.push_back(std::move(a->job));  // still posted: after the Group
  }
  for (auto& j : left) {
    if (j.done) j.done(gone);
  }
  active_.clear();
  inflight_.clear();
}

}  // namespace gw::torch
