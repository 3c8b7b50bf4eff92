// Communicator: setup, the public calls, progress (one CQ for all peers, completions
// dispatched to collectives by wr_id) and error handling. Engines: coll_ring.cc, coll_rd.cc.
#include <algorithm>
#include <cstring>
#include <optional>

#include "coll_device.h"
#include "coll_impl.h"
#include "coll_notice.h"
#include "gw_config.h"
#include "log.h"
#include "reduce_kernels.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(coll,
               {"coll.chunk_bytes", ConfigType::kInt, "262144",
                "ring pipeline chunk: each rank's segment is cut into chunks of this size "
                "(default: the best of 64 KiB..4 MiB in BENCHMARKS.md)"},
               {"coll.pipeline_depth", ConfigType::kInt, "4",
                "ring chunks received ahead per step (scratch = depth x chunk_bytes)"},
               {"coll.rd_max_bytes", ConfigType::kInt, "262144",
                "algo=auto: allreduce of at most this many bytes uses recursive doubling, "
                "larger ones the ring (default: the measured crossover, BENCHMARKS.md)"},
               {"coll.timeout_ms", ConfigType::kInt, "60000", "default timeout of a collective"},
               {"coll.check_args", ConfigType::kBool, "true",
                "send each call's signature to peers so mismatched calls fail clearly"},
               {"coll.device_host_max_bytes", ConfigType::kInt, "65536",
                "device-buffer allreduce of at most this many bytes: one copy to pinned host "
                "memory, host reduction, one copy back (larger: the device ring); recursive "
                "doubling always reduces on the host. Not yet measured on a GPU: conservative"},
               {"coll.alltoall_bruck_max_bytes", ConfigType::kInt, "4096",
                "host alltoall with blocks of at most this many bytes uses Bruck's log-step "
                "algorithm (fewer, larger messages), larger blocks pairwise exchange"},
               {"coll.gather_tree_max_bytes", ConfigType::kInt, "0",
                "host gather/scatter with blocks of at most this many bytes uses a binomial tree "
                "(log2 n rounds, every block relayed); 0: always direct, which was faster at 8 "
                "ranks on 2 shared cores (a tree hop costs a relay's wake-up)"});

constexpr const char* kSameCall =
    ": every rank must call the same collectives in the same order with the same count, dtype "
    "and op, and all with host or all with device buffers";

using coll::Kind;
using coll::Task;

// create()'s settings: each option as given, else its config key; checked.
Status configure(Communicator::Impl& im, const CommOptions& o) {
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  auto pick = [&](int64_t given, const char* key, bool zero_is_default) -> Result<int64_t> {
    if (zero_is_default ? given > 0 : given >= 0) return given;
    return cfg.get_int(key);
  };
  GW_ASSIGN_OR_RETURN(int64_t chunk, pick(o.chunk_bytes, "coll.chunk_bytes", true));
  GW_ASSIGN_OR_RETURN(int64_t depth, pick(o.pipeline_depth, "coll.pipeline_depth", true));
  GW_ASSIGN_OR_RETURN(int64_t rd_max, pick(o.rd_max_bytes, "coll.rd_max_bytes", false));
  GW_ASSIGN_OR_RETURN(int64_t tmo, pick(o.timeout.count() / 1'000'000, "coll.timeout_ms", true));
  GW_ASSIGN_OR_RETURN(int64_t dev_host,
                      pick(o.device_host_max_bytes, "coll.device_host_max_bytes", false));
  GW_ASSIGN_OR_RETURN(int64_t bruck,
                      pick(o.alltoall_bruck_max_bytes, "coll.alltoall_bruck_max_bytes", false));
  GW_ASSIGN_OR_RETURN(int64_t tree,
                      pick(o.gather_tree_max_bytes, "coll.gather_tree_max_bytes", false));
  if (o.timeout.count() > 0 && o.timeout < Millis(1)) tmo = 1;
  bool check = o.check_args > 0;
  if (o.check_args < 0) {
    GW_ASSIGN_OR_RETURN(check, cfg.get_bool("coll.check_args"));
  }
  if (chunk < 1 || depth < 1 || depth > 64 || rd_max < 0 || tmo < 1) {
    return Status(Code::kInvalidArgument,
                  "coll: need chunk_bytes >= 1, 1 <= pipeline_depth <= 64, rd_max_bytes >= 0, "
                  "timeout >= 1 ms; got " +
                      std::to_string(chunk) + ", " + std::to_string(depth) + ", " +
                      std::to_string(rd_max) + ", " + std::to_string(tmo) + " ms");
  }
  im.chunk_bytes = static_cast<size_t>(chunk);
  im.depth = static_cast<uint32_t>(depth);
  im.rd_max_bytes = static_cast<size_t>(rd_max);
  im.timeout = Millis(tmo);
  im.check_args = check;
  im.device_host_max_bytes = static_cast<size_t>(std::clamp<int64_t>(dev_host, 0, 1 << 30));
  im.bruck_max_bytes = static_cast<size_t>(std::clamp<int64_t>(bruck, 0, 1 << 30));
  im.tree_max_bytes = static_cast<size_t>(std::clamp<int64_t>(tree, 0, 1 << 30));
  const auto& props = im.group.transport().properties();
  im.needs_mr = props.requires_registration;
  if (props.max_outstanding > 0)
    im.max_outstanding = static_cast<uint32_t>(std::min<size_t>(props.max_outstanding / 2, 64));
  im.max_outstanding = std::max<uint32_t>(im.max_outstanding, 1);
  return Status();
}

// begin()'s fresh slot: every field a call sets or counts, back to its start (once per call).
inline void reset(Task& op, Kind kind, DataType dt, ReduceOp rop, size_t count, Nanos timeout) {
  op.active = true;
  op.gen = (op.gen + 1) & 0xFFFFFF;
  op.kind = kind;
  op.dt = dt;
  op.rop = rop;
  op.es = dtype_size(dt);
  op.count = count;
  op.root = 0;
  op.algo = Algo::kRing;
  op.engine = coll::Engine::kNone;
  op.done = false;
  op.status = Status();
  op.started = Clock::now();  // the deadline's and the flight record's one clock read
  op.deadline = Deadline(op.started, timeout);
  op.in = nullptr;
  op.work = op.out = nullptr;
  op.bucket.clear();
  op.source = nullptr;
  op.received = nullptr;
  op.device = false;
  op.dev_out = nullptr;
  op.units = op.sends_total = op.recvs_total = 0;
  op.next_send = op.next_recv = op.sends_done = op.recvs_done = 0;
  op.inflight_sends = op.inflight_recvs = op.hdr_pending = op.nheld = 0;
  op.rd_steps = op.rd_cur = op.rd_left = 0;
}

}  // namespace

// ---- setup ---------------------------------------------------------------------------------

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() {
  if (impl_) impl_->health.server.reset();  // no query of a communicator that is going
  if (impl_ && impl_->background) {
    impl_->background = false;
    impl_->group.transport().stop_background();
  }
  std::optional<DriveScope> d;
  if (impl_) d.emplace(impl_->group.transport().gate());
  if (impl_ && !impl_->drained && impl_->transport_holds_requests()) {
    impl_->shutdown();
    coll::park_impl(std::move(impl_));
  }
}
int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->n; }
Status Communicator::status() const { return impl_->broken; }
void Communicator::abort(std::string_view reason) { impl_->faults.request_abort(reason); }
Status Communicator::handle(std::span<const Completion> cs) {
  auto d = impl_->drive();
  impl_->faults.abort_if_requested();
  for (const Completion& c : cs) impl_->dispatch(c);
  return impl_->broken;
}

Result<std::unique_ptr<Communicator>> Communicator::create(Group& group, const CommOptions& o) {
  return create(group, o, nullptr);
}

Result<std::unique_ptr<Communicator>> Communicator::create(Group& group, const CommOptions& o,
                                                           Impl* prev) {
  auto impl = std::make_unique<Impl>(group);
  impl->opts = o;
  impl->epoch = group.epoch();
  impl->comm_index = group.next_comm();
  impl->rank = group.rank();
  impl->n = group.size();
  GW_RETURN_IF_ERROR(configure(*impl, o));
  impl->user_mrs.reserve(coll::Poster::kMaxUserMrs);
  impl->hier_init();
  {
    // After a shrink or grow the transport's progress thread runs already: hold it off while
    // this registers and posts (a nested scope costs nothing).
    DriveScope d(group.transport().gate());
    // Tags of this epoch may be dropped from 256 shrinks ago (Transport::cancel_tags).
    group.transport().accept_tags(coll::kEpochMask, coll::make_tag(0xC0, impl->epoch, 0, 0));
    GW_RETURN_IF_ERROR(coll::notices_init(*impl));
  }
  GW_RETURN_IF_ERROR(impl->flight.init(o.flight_records, o.flight_dir, prev));
  GW_RETURN_IF_ERROR(impl->health.init(prev));
  for (size_t s = 0; prev && s < impl->ops.size(); ++s)  // a late completion never matches
    impl->ops[s].gen = (prev->ops[s].gen + 1) & 0xFFFFFF;
  // Peers are served while this rank computes between calls (transport.progress).
  if (Status st = group.transport().start_background(); !st.ok())
    return st.with_context("coll: transport progress thread");
  impl->background = group.transport().background();
  log::get("gw.coll")->debug(
      "coll: rank {}/{} over {}: chunk {} B, depth {}, rd <= {} B, "
      "kernels {}",
      impl->rank, impl->n, group.transport().properties().name, impl->chunk_bytes, impl->depth,
      impl->rd_max_bytes, coll::reduce_target_name());
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Algo Communicator::choose_algo(size_t bytes) const { return impl_->auto_algo(bytes); }

std::string Communicator::Impl::where(const Task& op) const {
  return coll::where(op.desc, rank, n);
}

std::string coll::where(const Desc& mine, int rank, int n) {
  return describe(mine) + " on rank " + std::to_string(rank) + " of " + std::to_string(n);
}

Result<Task*> Communicator::Impl::begin(Kind kind, DataType dt, ReduceOp rop, size_t count,
                                        const CallOptions& call) {
  faults.abort_if_requested();
  flight.poll();
  if (!broken.ok()) {
    flight.refused(kind, dt, rop, count);
    return Status(broken.code(),
                  "coll: communicator unusable after an earlier error (shrink() it to go "
                  "on without the failed ranks, or destroy it and its Group): " +
                      std::string(broken.message()))
        .with_rank(broken.rank());
  }
  if (static_cast<unsigned>(dt) >= kNumDataTypes || static_cast<unsigned>(rop) >= kNumReduceOps)
    return Status(Code::kInvalidArgument, "coll: unknown dtype or reduce op");
  Task* op = nullptr;
  for (auto& o : ops) {
    if (!o.active) {
      op = &o;
      break;
    }
  }
  if (!op) {
    return Status(Code::kResourceExhausted, "coll: " + std::to_string(kSlots) +
                                                " collectives already in flight; wait on "
                                                "some before starting more");
  }
  reset(*op, kind, dt, rop, count, call.timeout.count() > 0 ? call.timeout : timeout);
  // Point-to-point calls involve two ranks: they must not shift the collectives' numbering.
  op->seq = kind == Kind::kSend || kind == Kind::kRecv ? 0 : ++seq;
  coll::release_stage(*this, *op);  // a failed host-staged call's pinned slot
  if (kind == Kind::kAllreduce) {
    op->algo = call.algo == Algo::kAuto ? auto_algo(count * op->es) : call.algo;
  }
  op->desc = coll::Desc{.magic = 0x67776331u,
                        .kind = static_cast<uint8_t>(kind),
                        .dtype = static_cast<uint8_t>(dt),
                        .op = static_cast<uint8_t>(rop),
                        .algo = static_cast<uint8_t>(op->algo),
                        .count = count,
                        .seq = op->seq};
  if (kind != Kind::kAllreduce && kind != Kind::kReduceScatter) op->desc.op = 0;
  return op;
}

Status Communicator::Impl::finish_now(Task& op) {
  const size_t bytes = op.count * op.es;
  if (op.kind == Kind::kAllgather || op.kind == Kind::kReduceScatter ||
      op.kind == Kind::kAllreduce) {
    if (op.out != op.in && bytes) {
      if (op.device)
        GW_RETURN_IF_ERROR(coll::copy_sync(op.out, op.in, bytes));
      else
        std::memmove(op.out, op.in, bytes);
    }
  }
  op.done = true;
  maybe_complete(op);
  return Status();
}

Result<CollHandle> Communicator::Impl::launch(Task& op) {
  CollHandle h{static_cast<uint32_t>(slot_of(op)), op.gen};
  flight.start(op);
  Status st;
  if (op.engine == coll::Engine::kXchg) {  // set by the caller: alltoall(v), gather, scatter
    st = coll::xchg::setup(*this, op);
  } else if (op.engine == coll::Engine::kBruck) {
    st = coll::bruck::setup(*this, op);
  } else if (n == 1) {
    st = finish_now(op);
  } else if (op.kind == Kind::kBarrier ||
             (op.kind == Kind::kAllreduce && op.algo == Algo::kRecursiveDoubling)) {
    st = coll::rd::setup(*this, op);
  } else if (op.kind == Kind::kAllreduce && op.algo == Algo::kHierarchical) {
    st = coll::hier::setup(*this, op);
  } else {
    st = coll::ring::setup(*this, op);
  }
  if (st.ok() && !op.done) st = advance(op);
  if (!st.ok()) {
    faults.fail(op, st);
    op.active = false;
    return op.status;
  }
  return h;
}

// ---- progress and errors -------------------------------------------------------------------

Status Communicator::Impl::advance(Task& op) {
  if (op.done || op.engine == coll::Engine::kP2p) return Status();
  Status st = op.engine == coll::Engine::kRd      ? coll::rd::advance(*this, op)
              : op.engine == coll::Engine::kHier  ? coll::hier::advance(*this, op)
              : op.engine == coll::Engine::kXchg  ? coll::xchg::advance(*this, op)
              : op.engine == coll::Engine::kBruck ? coll::bruck::advance(*this, op)
                                                  : coll::ring::advance(*this, op);
  if (!st.ok()) return st;
  maybe_complete(op);
  return Status();
}

void Communicator::Impl::maybe_complete(Task& op) {
  if (!op.done) {
    if (op.sends_done < op.sends_total || op.recvs_done < op.recvs_total || op.hdr_pending ||
        op.nheld)
      return;
    if ((op.engine == coll::Engine::kRd || op.engine == coll::Engine::kBruck) &&
        op.rd_cur < op.rd_steps)
      return;
    if (op.engine == coll::Engine::kHier && op.phase < 3) return;
    op.done = true;
  }
  if (!op.status.ok()) return flight.end(op, op.status);
  if (op.dev_out || op.stage_slot >= 0) {  // host-staged device call: results to the device
    if (Status st = coll::device_complete(*this, op); !st.ok()) {
      op.status = st;
      faults.fail_all(st);
    }
    return flight.end(op, op.status);
  }
  flight.end(op, op.status);
  // Fused bucket: hand every tensor its part of the reduced buffer.
  size_t off = 0;
  for (auto& t : op.bucket) {
    if (t.count) std::memcpy(t.recv, op.work + off * op.es, t.count * op.es);
    off += t.count;
  }
  op.bucket.clear();
}

void coll::Faults::fail(Task& op, Status st) {
  (void)op;
  fail_all(st);
}

namespace {

// A completion with an error (cold: only here is an error's text built).
void completion_failed(Communicator::Impl& im, Task& op, const Completion& c, bool is_send,
                       uint32_t unit) {
  auto peer = [&c] { return "rank " + std::to_string(c.peer_id); };
  if (op.engine == coll::Engine::kP2p && !is_send && c.code == Code::kInvalidArgument) {
    // The transport dropped the too-long message and the endpoint carries on (gw_transport.h):
    // only this receive fails, not the communicator.
    op.status = Status(Code::kInvalidArgument, im.where(op) + ": " + peer() + " sent a " +
                                                   std::to_string(c.len) +
                                                   "-byte message, longer than the receive buffer");
    op.done = true;
    im.flight.end(op, op.status);
    return;
  }
  if (!is_send && c.code == Code::kInvalidArgument) {
    std::string theirs;
    if (op.engine == coll::Engine::kRd && c.len > coll::kRdHdr) {
      theirs = " (count=" + std::to_string((c.len - coll::kRdHdr) / op.es) + " if its dtype is " +
               dtype_name(op.dt) + ")";
    } else if (unit >= coll::kHdrUnit) {
      theirs =
          " where this rank expected its call descriptor (it ran recursive doubling: "
          "another size, or host buffers where this rank has device buffers)";
    }
    im.faults.fail(
        op,
        Status(Code::kInvalidArgument,
               im.where(op) + ": " + peer() + " sent a " + std::to_string(c.len) + "-byte message" +
                   theirs + " but this rank called " + coll::describe(op.desc) +
                   ", which expects fewer bytes: every rank must call the same "
                   "collectives in the same order with the same count, dtype and op"));
  } else {
    std::string why = c.ep ? c.ep->status().to_string() : std::string(code_name(c.code));
    im.faults.peer_failed(
        Status(Code::kRemoteError, im.where(op) + ": " + peer() + " failed: " + why)
            .with_rank(static_cast<int>(c.peer_id)));
  }
}

}  // namespace

void Communicator::Impl::dispatch(const Completion& c) {
  if (coll::notices_on_completion(*this, c)) return;
  if (c.op == gw::Op::kEndpointError) {
    // Not a failure by itself: a peer that finished its part closes, and the messages it sent
    // stay receivable. What cannot complete fails on its own: the endpoint fails its pending
    // requests, and a later post to it fails unless the message is already here.
    return;
  }
  const int slot = static_cast<int>(c.wr_id >> 56);
  if (slot >= kSlots) return;
  Task& op = ops[static_cast<size_t>(slot)];
  if (!op.active || op.done || op.gen != ((c.wr_id >> 32) & 0xFFFFFF)) return;  // stale
  const bool is_send = (c.wr_id >> 31) & 1;
  const uint32_t unit = static_cast<uint32_t>(c.wr_id & 0x7FFFFFFF);
  if (op.engine == coll::Engine::kP2p && !is_send && op.received) *op.received = c.len;
  if (c.code != Code::kOk) return completion_failed(*this, op, c, is_send, unit);
  if (op.engine == coll::Engine::kP2p) {
    ++(is_send ? op.sends_done : op.recvs_done);
    if (!is_send && op.source) *op.source = static_cast<int>(c.peer_id);
    maybe_complete(op);
    return;
  }
  Status st;
  if (unit >= coll::kHdrUnit) {
    --op.hdr_pending;
    if (!is_send)
      st = poster.check_desc(op, static_cast<int>(c.peer_id), &op.hdr_in[unit - coll::kHdrUnit],
                             c.len);
  } else if (is_send) {
    --op.inflight_sends;
    ++op.sends_done;
    if (op.engine == coll::Engine::kRd) st = coll::rd::on_send(*this, op, unit);
  } else {
    --op.inflight_recvs;
    const int from = static_cast<int>(c.peer_id);
    st = op.engine == coll::Engine::kRd      ? coll::rd::on_recv(*this, op, unit, c.len, from)
         : op.engine == coll::Engine::kXchg  ? coll::xchg::on_recv(*this, op, unit, c.len, from)
         : op.engine == coll::Engine::kBruck ? coll::bruck::on_recv(*this, op, unit, c.len, from)
                                             : coll::ring::on_recv(*this, op, unit, c.len);
  }
  if (st.ok()) st = advance(op);
  if (!st.ok()) faults.fail(op, st);
}

Status coll::check_desc(const Desc& mine, int rank, int n, int peer, const Desc* d, size_t len) {
  const bool whole = len >= sizeof(Desc) && d->magic == mine.magic;
  if (whole && *d == mine) return Status();
  if (whole && d->relayed && len >= 2 * sizeof(Desc)) {  // see rd::relay()
    return Status(Code::kInvalidArgument,
                  where(mine, rank, n) + ": rank " + std::to_string(d->origin) +
                      " found that rank " + std::to_string(d[1].origin) + " called " +
                      (d[1].magic == d->magic ? describe(d[1]) : "something else") +
                      " while rank " + std::to_string(d->origin) + " called " + describe(*d) +
                      " (passed on by rank " + std::to_string(peer) + ")" + kSameCall);
  }
  return Status(Code::kInvalidArgument, where(mine, rank, n) + ": rank " + std::to_string(peer) +
                                            " called " +
                                            (whole ? describe(*d) : std::string("something else")) +
                                            " but this rank called " + describe(mine) + kSameCall);
}

Status Communicator::Impl::poll_once(Nanos wait) {
  if (faults.abort_if_requested()) return broken;  // no sleep after it: the caller's op is failed
  flight.poll();
  auto& cq = group.transport().cq();
  auto r = wait.count() > 0 ? cq.wait(comps, wait) : cq.poll(comps);
  if (!r.ok() && r.status().code() != Code::kTimeout) {
    faults.fail_all(r.status().with_context("coll: transport failed"));
    return broken;
  }
  if (r.ok()) flight.heard({comps.data(), *r});
  for (size_t i = 0; r.ok() && i < *r; ++i) dispatch(comps[i]);
  faults.check_deadlines();
  health.poll(!r.ok() || *r == 0);
  return Status();
}

}  // namespace gw
