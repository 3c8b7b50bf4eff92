/// @file gw_unexpected_store.h
/// The transport core's store of unexpected messages: a byte budget, beyond which the driver
/// leaves a peer's messages in the network (back-pressure) rather than fail it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace gw::core {

/// A buffer for one unexpected message.
struct UBuf {
  std::unique_ptr<uint8_t[]> p;
  size_t cap = 0;
};

/// Buffers of unexpected messages, at most `budget` bytes in use. Freed buffers are kept and
/// reused for any message of at least half their size, so a steady stream of early arrivals
/// does not allocate.
class UnexpectedStore {
 public:
  UnexpectedStore() = default;
  UnexpectedStore(const UnexpectedStore&) = delete;
  UnexpectedStore& operator=(const UnexpectedStore&) = delete;
  ~UnexpectedStore();
  void init(uint64_t budget) { budget_ = budget; }
  /// Called with a buffer's bytes before the store frees them: a driver that registered a
  /// buffer it took (rdma's pulls) drops the registration, so freed memory is never reached
  /// through it.
  using FreeHook = void (*)(void* ctx, const uint8_t* p, size_t cap);
  void set_free_hook(FreeHook fn, void* ctx) {
    hook_ = fn;
    hook_ctx_ = ctx;
  }
  /// A buffer for `len` bytes. False: the budget is spent (or memory is short) -- leave the
  /// message in the network and try again once a receive consumed buffered ones.
  bool take(uint64_t len, UBuf* out);
  /// Return a buffer taken for a message of `len` bytes.
  void give(UBuf b, uint64_t len);
  uint64_t used() const { return used_; }

 private:
  void drop(UBuf& b);
  static constexpr size_t kKeep = 16;
  UBuf kept_[kKeep];
  size_t nkept_ = 0, kept_bytes_ = 0;
  uint64_t used_ = 0, budget_ = 0;
  FreeHook hook_ = nullptr;
  void* hook_ctx_ = nullptr;
};

}  // namespace gw::core
