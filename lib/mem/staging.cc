// StagingPool: pinned slots, one event each, one copy stream per direction.
#include "gw_staging.h"

namespace gw {

Result<std::unique_ptr<StagingPool>> StagingPool::create(DeviceOps* ops, const Options& o,
                                                         std::string owner) {
  if (o.chunk_bytes == 0 || o.slots == 0) {
    return Status(Code::kInvalidArgument,
                  owner + ": staging pool needs chunk_bytes > 0 and slots > 0");
  }
  std::unique_ptr<StagingPool> p(new StagingPool());
  p->ops_ = ops;
  p->owner_ = std::move(owner);
  p->chunk_ = (o.chunk_bytes + 4095) / 4096 * 4096;
  GW_ASSIGN_OR_RETURN(void* mem, ops->alloc_pinned(p->chunk_ * o.slots));
  // Freed by the destructor through `ops` (which may be a test's table, not the global one).
  p->slots_.resize(o.slots);
  p->free_.reserve(o.slots);
  for (uint32_t i = 0; i < o.slots; ++i)
    p->slots_[i].buf = static_cast<uint8_t*>(mem) + i * p->chunk_;
  for (uint32_t i = o.slots; i-- > 0;) p->free_.push_back(static_cast<int>(i));
  for (auto& s : p->slots_) {
    auto ev = ops->create_event();
    if (!ev.ok()) return ev.status().with_context(p->owner_ + ": staging event");
    s.ev = *ev;
  }
  for (DeviceStream* s : {&p->out_s_, &p->in_s_}) {
    auto st = ops->create_stream();
    if (!st.ok()) return st.status().with_context(p->owner_ + ": staging stream");
    *s = *st;
  }
  return p;
}

StagingPool::~StagingPool() {
  if (!ops_) return;
  // Copies may still be running into the pinned memory: finish them before freeing it.
  for (DeviceStream s : {out_s_, in_s_}) {
    if (s) {
      (void)ops_->synchronize(s);
      ops_->destroy_stream(s);
    }
  }
  for (auto& s : slots_)
    if (s.ev) ops_->destroy_event(s.ev);
  if (!slots_.empty() && slots_[0].buf) ops_->free_pinned(slots_[0].buf);
}

int StagingPool::acquire() {
  if (free_.empty()) return -1;
  int i = free_.back();
  free_.pop_back();
  return i;
}

void StagingPool::release(int slot) {
  slots_[static_cast<size_t>(slot)].copying = false;
  free_.push_back(slot);
}

Status StagingPool::start(int slot, void* dst, const void* src, size_t n, DeviceStream s,
                          bool out) {
  if (n > chunk_) {
    return Status(Code::kInvalidArgument, owner_ + ": staging copy of " + std::to_string(n) +
                                              " bytes exceeds the slot size " +
                                              std::to_string(chunk_));
  }
  Slot& sl = slots_[static_cast<size_t>(slot)];
  GW_RETURN_IF_ERROR(ops_->copy_async(dst, src, n, s).with_context(owner_));
  GW_RETURN_IF_ERROR(ops_->record(sl.ev, s).with_context(owner_));
  sl.copying = true;
  (out ? bytes_out_ : bytes_in_) += n;
  return Status();
}

Status StagingPool::stage_out(int slot, const void* dev_src, size_t n) {
  return start(slot, data(slot), dev_src, n, out_s_, true);
}

Status StagingPool::stage_in(int slot, void* dev_dst, size_t n) {
  return start(slot, dev_dst, data(slot), n, in_s_, false);
}

Result<bool> StagingPool::ready(int slot) {
  Slot& sl = slots_[static_cast<size_t>(slot)];
  if (!sl.copying) return true;
  GW_ASSIGN_OR_RETURN(bool done, ops_->query(sl.ev));
  if (done) sl.copying = false;
  return done;
}

Status StagingPool::copy_in_sync(void* dev_dst, const void* src, size_t n) {
  GW_RETURN_IF_ERROR(ops_->copy_async(dev_dst, src, n, in_s_).with_context(owner_));
  bytes_in_ += n;
  return ops_->synchronize(in_s_).with_context(owner_);
}

Status StagingPool::copy_out_sync(void* dst, const void* dev_src, size_t n) {
  GW_RETURN_IF_ERROR(ops_->copy_async(dst, dev_src, n, out_s_).with_context(owner_));
  bytes_out_ += n;
  return ops_->synchronize(out_s_).with_context(owner_);
}

Status StagingPool::drain() {
  GW_RETURN_IF_ERROR(ops_->synchronize(out_s_).with_context(owner_));
  GW_RETURN_IF_ERROR(ops_->synchronize(in_s_).with_context(owner_));
  for (auto& s : slots_) s.copying = false;
  return Status();
}

}  // namespace gw
