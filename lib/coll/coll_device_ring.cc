// Allreduce of device buffers: a pipelined ring (reduce-scatter, then allgather) whose
// reductions are the GPU driver's kernels, launched on a stream while later chunks are on the
// wire. The transport moves the device memory itself (GPUDirect) or stages it (TCP), so this
// engine only orders the work. It runs to completion inside allreduce_async (the call's
// deadline applies); completions of other collectives in flight are handed to the
// communicator's dispatcher.
//
// Ring: at reduce-scatter step s rank r sends segment r-s and receives segment r-s-1 into a
// scratch slot, reduced into the work buffer; after n-1 steps it holds segment r+1 reduced, and
// the allgather (step a: send r+1-a, receive r-a) hands every rank the same bytes. A
// reduce-scatter alone is shifted by one segment (send r-s-1, receive r-s-2), so that rank r
// ends with its own block r, whose last reduction goes straight to the caller's buffer.
#include <algorithm>
#include <vector>

#include "coll_device.h"
#include "coll_impl.h"
#include "log.h"

namespace gw::coll {
namespace {

constexpr uint64_t kDevWrMagic = 0xFDull << 56;

int mod(int a, int n) { return ((a % n) + n) % n; }

// Device resources kept between calls of one thread (a communicator is driven by one thread).
struct DeviceCache {
  StreamHandle stream;
  DeviceBuffer scratch;
  std::vector<DeviceEvent> events;
  DeviceOps* ops = nullptr;
  ~DeviceCache() {
    for (DeviceEvent e : events) ops->destroy_event(e);
  }
};

class DeviceRing {
 public:
  DeviceRing(Communicator::Impl& im, Task& op, void* rs_out)
      : im_(im), op_(op), rs_out_(static_cast<uint8_t*>(rs_out)), rot_(rs_out ? -1 : 0) {}
  Status run(const void* send, void* recv);

 private:
  struct Unit {
    size_t off = 0, len = 0;    // elements received (into the work buffer's place)
    size_t soff = 0, slen = 0;  // elements sent
    bool rs = false;
    uint32_t step = 0;
  };
  Unit unit(uint32_t u) const;
  void seg_chunk(int x, uint32_t k, size_t* off, size_t* len) const;
  Status setup(const void* send, void* recv);
  Status post();
  Status poll_reductions();
  Status on_completion(const Completion& c);
  bool dep_done(uint32_t u) const;

  Communicator::Impl& im_;
  Task& op_;
  uint8_t* rs_out_;  // reduce-scatter: this rank's block (null: allreduce)
  int rot_;          // segment shift of the reduce-scatter phase
  DeviceOps* ops_ = nullptr;
  DeviceCache* cache_ = nullptr;
  uint8_t* work_ = nullptr;
  // In the Task, not here: after a failure requests stay posted with them (the communicator
  // is broken, so the Task is not reused before it is destroyed).
  MemoryRegion& work_mr_ = op_.dev_mrs[0];
  MemoryRegion& scratch_mr_ = op_.dev_mrs[1];
  int n_ = 1, r_ = 0, next_ = 0, prev_ = 0;
  uint32_t C_ = 1, units_ = 0, depth_ = 1, rs_units_ = 0;
  size_t chunk_ = 1;
  std::vector<uint8_t> sent_, recvd_, reduced_;
  uint32_t next_send_ = 0, next_recv_ = 0, sends_done_ = 0, recvs_done_ = 0;
  uint32_t inflight_s_ = 0, inflight_r_ = 0;
  std::vector<uint32_t> reducing_;  // RS units whose kernel is queued, in launch order
  size_t reducing_head_ = 0;
};

void DeviceRing::seg_chunk(int x, uint32_t k, size_t* off, size_t* len) const {
  const size_t n = static_cast<size_t>(n_), ux = static_cast<size_t>(x);
  const size_t base = op_.count / n, rem = op_.count % n;
  const size_t seg_off = ux * base + std::min(ux, rem), seg_len = base + (ux < rem ? 1 : 0);
  const size_t b = std::min(seg_len, size_t{k} * chunk_);
  *off = seg_off + b;
  *len = std::min(seg_len - b, chunk_);
}

DeviceRing::Unit DeviceRing::unit(uint32_t u) const {
  Unit io;
  io.step = u / C_;
  const uint32_t k = u % C_;
  const int s = static_cast<int>(io.step);
  io.rs = u < rs_units_;
  if (io.rs) {
    seg_chunk(mod(r_ - s + rot_, n_), k, &io.soff, &io.slen);
    seg_chunk(mod(r_ - s - 1 + rot_, n_), k, &io.off, &io.len);
  } else {
    const int a = s - (n_ - 1);
    seg_chunk(mod(r_ + 1 - a, n_), k, &io.soff, &io.slen);
    seg_chunk(mod(r_ - a, n_), k, &io.off, &io.len);
  }
  return io;
}

// A unit's send carries data that an earlier unit (same chunk, previous step) produced.
bool DeviceRing::dep_done(uint32_t u) const {
  if (u < C_) return true;  // reduce-scatter step 0 sends this rank's own data
  const uint32_t d = u - C_;
  return d < rs_units_ ? reduced_[d] != 0 : recvd_[d] != 0;
}

Status DeviceRing::setup(const void* send, void* recv) {
  GW_ASSIGN_OR_RETURN(ops_, device_ops());
  GW_RETURN_IF_ERROR(device_reduce_status());
  thread_local DeviceCache cache;
  cache_ = &cache;
  if (!cache.stream.get()) {
    GW_ASSIGN_OR_RETURN(cache.stream, StreamHandle::create());
    cache.ops = ops_;
  }
  n_ = im_.n;
  r_ = im_.rank;
  next_ = mod(r_ + 1, n_);
  prev_ = mod(r_ - 1, n_);
  // One rank: the result is the input (a reduce-scatter's block is all of it).
  work_ = static_cast<uint8_t*>(n_ == 1 && rs_out_ ? rs_out_ : recv);
  const size_t bytes = op_.count * op_.es;
  if (send != work_ && bytes) {
    GW_RETURN_IF_ERROR(ops_->copy_async(work_, send, bytes, cache.stream.get()));
    GW_RETURN_IF_ERROR(ops_->synchronize(cache.stream.get()));
  }
  if (n_ == 1 || bytes == 0) return Status();
  // The call's descriptor goes to both ring neighbours as the host ring's does (same tags),
  // so a rank that passed host buffers, or another count or dtype, fails at once.
  if (!rs_out_) op_.desc.algo = static_cast<uint8_t>(Algo::kRing);
  op_.desc.device = 1;
  int to[kBackHdr + 1] = {next_, -1, -1, -1, -1}, from[kBackHdr + 1] = {prev_, -1, -1, -1, -1};
  size_t hdrs = 1;
  if (n_ > 2) {
    to[kBackHdr] = prev_;
    from[kBackHdr] = next_;
    hdrs = kBackHdr + 1;
  }
  GW_RETURN_IF_ERROR(im_.poster.headers(op_, {to, hdrs}, {from, hdrs}));
  chunk_ = std::max<size_t>(1, im_.chunk_bytes / op_.es);
  const size_t seg_max = (op_.count + static_cast<size_t>(n_) - 1) / static_cast<size_t>(n_);
  C_ = static_cast<uint32_t>(std::max<size_t>(1, (seg_max + chunk_ - 1) / chunk_));
  rs_units_ = static_cast<uint32_t>(n_ - 1) * C_;
  units_ = rs_out_ ? rs_units_ : 2 * rs_units_;
  depth_ = std::max<uint32_t>(1, im_.depth);
  const size_t scratch_bytes = size_t{depth_} * chunk_ * op_.es;
  if (cache.scratch.size() < scratch_bytes) {
    cache.scratch = DeviceBuffer();
    GW_ASSIGN_OR_RETURN(cache.scratch, DeviceBuffer::create(scratch_bytes));
  }
  while (cache.events.size() < depth_) {
    GW_ASSIGN_OR_RETURN(DeviceEvent e, ops_->create_event());
    cache.events.push_back(e);
  }
  Transport& t = im_.group.transport();
  GW_ASSIGN_OR_RETURN(work_mr_, t.register_memory(work_, bytes, MemKind::kCudaDevice));
  GW_ASSIGN_OR_RETURN(scratch_mr_, t.register_memory(cache.scratch.get(), cache.scratch.size(),
                                                     MemKind::kCudaDevice));
  sent_.assign(units_, 0);
  recvd_.assign(units_, 0);
  reduced_.assign(rs_units_, 0);
  reducing_.clear();
  reducing_.reserve(rs_units_);
  return Status();
}

Status DeviceRing::post() {
  auto tag = [&](uint32_t u) { return make_tag(0xC1, im_.epoch, op_.seq, u); };
  while (next_send_ < units_ && inflight_s_ < im_.max_outstanding && dep_done(next_send_)) {
    // Reduce-scatter sends stay within `depth` units of this rank's own reductions: the next
    // rank frees scratch slots at the same pace, and a chunk that arrives before its slot is
    // posted is buffered (and copied once more) by the transport.
    if (next_send_ < rs_units_ && next_send_ >= depth_ && !reduced_[next_send_ - depth_]) break;
    const Unit io = unit(next_send_);
    SendRequest s{work_ + io.soff * op_.es, io.slen * op_.es, tag(next_send_),
                  kDevWrMagic | (uint64_t{1} << 31) | next_send_, &work_mr_};
    auto took = im_.group.endpoint(next_).post_send({&s, 1});
    if (!took.ok()) return took.status().with_rank(next_);  // the culprit, as the host ring's
    if (*took == 0) break;
    ++inflight_s_;
    ++next_send_;
  }
  while (next_recv_ < units_ && inflight_r_ < im_.max_outstanding) {
    const uint32_t u = next_recv_;
    const Unit io = unit(u);
    uint8_t* dst = work_ + io.off * op_.es;
    const MemoryRegion* mr = &work_mr_;
    if (io.rs) {
      // Scratch slot u % depth is free once unit u - depth is reduced.
      if (u >= depth_ && !reduced_[u - depth_]) break;
      dst = static_cast<uint8_t*>(cache_->scratch.get()) + size_t{u % depth_} * chunk_ * op_.es;
      mr = &scratch_mr_;
    }
    RecvRequest rq{dst, io.len * op_.es, tag(u), kDevWrMagic | u, mr};
    auto took = im_.group.endpoint(prev_).post_recv({&rq, 1});
    if (!took.ok()) return took.status().with_rank(prev_);
    if (*took == 0) break;
    ++inflight_r_;
    ++next_recv_;
  }
  return Status();
}

Status DeviceRing::poll_reductions() {
  while (reducing_head_ < reducing_.size()) {
    const uint32_t u = reducing_[reducing_head_];
    GW_ASSIGN_OR_RETURN(bool done, ops_->query(cache_->events[u % depth_]));
    if (!done) break;
    reduced_[u] = 1;
    ++reducing_head_;
  }
  return Status();
}

Status DeviceRing::on_completion(const Completion& c) {
  const bool is_send = (c.wr_id >> 31) & 1;
  const auto u = static_cast<uint32_t>(c.wr_id & 0x7FFFFFFF);
  if (c.code != Code::kOk || u >= units_) {
    const std::string why = c.ep ? c.ep->status().to_string() : std::string(code_name(c.code));
    return Status(c.code == Code::kInvalidArgument ? Code::kInvalidArgument : Code::kRemoteError,
                  im_.where(op_) + " (device buffers): rank " + std::to_string(c.peer_id) +
                      (c.code == Code::kInvalidArgument
                           ? " sent more than this rank expects: the ranks called the "
                             "collective with different counts or dtypes"
                           : " failed: " + why));
  }
  if (is_send) {
    --inflight_s_;
    ++sends_done_;
    return Status();
  }
  --inflight_r_;
  ++recvs_done_;
  const Unit io = unit(u);
  if (c.len != io.len * op_.es) {
    return Status(Code::kInvalidArgument,
                  im_.where(op_) + " (device buffers): rank " + std::to_string(prev_) + " sent " +
                      std::to_string(c.len) + " bytes, this rank expected " +
                      std::to_string(io.len * op_.es) + ": mismatched counts or dtypes");
  }
  recvd_[u] = 1;
  if (!io.rs) return Status();
  if (io.len == 0) {
    reduced_[u] = 1;
    return Status();
  }
  const bool last = io.step + 2 == static_cast<uint32_t>(n_);
  const uint32_t div = last && op_.rop == ReduceOp::kAvg ? static_cast<uint32_t>(n_) : 0;
  uint8_t* dst = work_ + io.off * op_.es;
  const uint8_t* local = dst;
  if (rs_out_ && last) {
    const size_t block = op_.count / static_cast<size_t>(n_);
    dst = rs_out_ + (io.off - block * static_cast<size_t>(r_)) * op_.es;
  }
  const uint8_t* in =
      static_cast<const uint8_t*>(cache_->scratch.get()) + size_t{u % depth_} * chunk_ * op_.es;
  DeviceStream s = cache_->stream.get();
  GW_RETURN_IF_ERROR(ops_->reduce(op_.dt, op_.rop, dst, in, local, io.len, div, s));
  GW_RETURN_IF_ERROR(ops_->record(cache_->events[u % depth_], s));
  reducing_.push_back(u);
  return Status();
}

Status DeviceRing::run(const void* send, void* recv) {
  GW_RETURN_IF_ERROR(setup(send, recv));
  if (units_ == 0) return Status();
  auto& cq = im_.group.transport().cq();
  Completion comps[64];
  while (sends_done_ < units_ || recvs_done_ < units_ || reducing_head_ < reducing_.size() ||
         op_.hdr_pending > 0) {
    // Reductions first: one that just finished lets post() send its chunk before we wait.
    GW_RETURN_IF_ERROR(poll_reductions());
    GW_RETURN_IF_ERROR(post());
    // Sleep on the transport only when no kernel is running (a kernel has no fd to wake us).
    const bool gpu_busy = reducing_head_ < reducing_.size();
    auto got = gpu_busy ? cq.poll(comps) : cq.wait(comps, Millis(1));
    if (!got.ok() && got.status().code() != Code::kTimeout) return got.status();
    for (size_t i = 0; got.ok() && i < *got; ++i) {
      const Completion& c = comps[i];
      const bool mine = c.op != Op::kEndpointError && (c.wr_id >> 56) == (kDevWrMagic >> 56);
      if (!mine) {
        // A neighbour's endpoint failing is no failure by itself: a neighbour that finished
        // its part closes, and what it sent stays receivable. Requests that cannot complete
        // fail on their own (their completion, or the post to a dead endpoint).
        im_.dispatch(c);  // this call's descriptors, or another collective's
        if (!op_.status.ok()) return op_.status;
        continue;
      }
      GW_RETURN_IF_ERROR(on_completion(c));
    }
    if (op_.deadline.expired()) {
      return Status(Code::kTimeout, im_.where(op_) +
                                        " (device buffers): not finished before its deadline "
                                        "(sent " +
                                        std::to_string(sends_done_) + "/" + std::to_string(units_) +
                                        ", received " + std::to_string(recvs_done_) + "/" +
                                        std::to_string(units_) + "); a peer may have stopped");
    }
  }
  return Status();
}

}  // namespace

Status run_device_ring(Communicator::Impl& im, Task& op, const void* send, void* recv,
                       void* rs_out) {
  return DeviceRing(im, op, rs_out).run(send, recv);
}

}  // namespace gw::coll
