// In-process store (threads of one process) and the prefix store.
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "gw_store.h"
#include "store_util.h"

namespace gw {
namespace {

constexpr std::string_view kName = "in-process store";

/// Keys in a map under one mutex; waiters sleep on a condition variable woken by set/add.
/// Thread-safety: every method locks mu_.
class InProcessStore final : public Store {
 public:
  Status set(std::string_view key, std::string_view value) override {
    GW_RETURN_IF_ERROR(store::check_sizes(kName, key, value));
    {
      std::lock_guard lock(mu_);
      map_.insert_or_assign(std::string(key), std::string(value));
    }
    cv_.notify_all();
    return Status();
  }

  Result<std::string> get(std::string_view key, Nanos timeout) override {
    std::string k(key);
    std::unique_lock lock(mu_);
    GW_RETURN_IF_ERROR(wait_locked(lock, {&k, 1}, timeout));
    return map_.find(k)->second;
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    int64_t v = 0;
    {
      std::lock_guard lock(mu_);
      auto it = map_.find(key);
      int64_t old = 0;
      if (it != map_.end()) {
        GW_ASSIGN_OR_RETURN(old, store::parse_counter(kName, key, it->second));
      }
      GW_ASSIGN_OR_RETURN(v, store::add_checked(kName, key, old, delta));
      map_.insert_or_assign(std::string(key), std::to_string(v));
    }
    cv_.notify_all();
    return v;
  }

  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    std::unique_lock lock(mu_);
    return wait_locked(lock, keys, timeout);
  }

  Result<bool> check(std::span<const std::string> keys) override {
    std::lock_guard lock(mu_);
    return missing_locked(keys).empty();
  }

 private:
  std::vector<std::string> missing_locked(std::span<const std::string> keys) const {
    std::vector<std::string> missing;
    for (auto& k : keys)
      if (!map_.contains(k)) missing.push_back(k);
    return missing;
  }

  Status wait_locked(std::unique_lock<std::mutex>& lock, std::span<const std::string> keys,
                     Nanos timeout) {
    Deadline deadline(store::bounded(timeout));
    auto all_there = [&] {
      for (auto& k : keys)
        if (!map_.contains(k)) return false;
      return true;
    };
    if (cv_.wait_until(lock, deadline.at(), all_there)) return Status();
    return store::missing_keys_timeout(kName, missing_locked(keys), timeout);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string, std::less<>> map_;
};

/// Puts "prefix/" before every key. Thread-safety: as the inner store.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix) + "/") {}

  Status set(std::string_view key, std::string_view value) override {
    return inner_->set(full(key), value);
  }
  Result<std::string> get(std::string_view key, Nanos timeout) override {
    return inner_->get(full(key), timeout);
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    return inner_->add(full(key), delta);
  }
  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    auto k = full(keys);
    return inner_->wait(k, timeout);
  }
  Result<bool> check(std::span<const std::string> keys) override {
    auto k = full(keys);
    return inner_->check(k);
  }

 private:
  std::string full(std::string_view key) const { return prefix_ + std::string(key); }
  std::vector<std::string> full(std::span<const std::string> keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (auto& k : keys) out.push_back(full(k));
    return out;
  }

  std::shared_ptr<Store> inner_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<Store> make_in_process_store() { return std::make_shared<InProcessStore>(); }

std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> inner, std::string prefix) {
  return std::make_shared<PrefixStore>(std::move(inner), std::move(prefix));
}

}  // namespace gw
