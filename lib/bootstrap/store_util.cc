// Helpers shared by the Store implementations.
#include "store_util.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "gw_store.h"

namespace gw::store {

std::string quote(std::string_view bytes) {
  static constexpr size_t kMaxShown = 200;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (out.size() > kMaxShown) {
      out += "...(" + std::to_string(bytes.size()) + " bytes)";
      break;
    }
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "'";
}

std::string key_list(std::span<const std::string> keys) {
  static constexpr size_t kMaxListed = 16;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kMaxListed; ++i) {
    if (i) out += ", ";
    out += quote(keys[i]);
  }
  if (keys.size() > kMaxListed) out += " and " + std::to_string(keys.size() - kMaxListed) + " more";
  return out;
}

Status missing_keys_timeout(std::string_view store, std::span<const std::string> missing,
                            Nanos waited) {
  auto ms = std::chrono::duration_cast<Millis>(waited).count();
  return Status(Code::kTimeout, std::string(store) + ": waited " + std::to_string(ms) +
                                    " ms, still missing " + std::to_string(missing.size()) +
                                    (missing.size() == 1 ? " key: " : " keys: ") +
                                    key_list(missing));
}

Status check_sizes(std::string_view store, std::string_view key, std::string_view value) {
  if (key.size() > kMaxItem || value.size() > kMaxItem) {
    return Status(Code::kInvalidArgument,
                  std::string(store) + ": key " + quote(key) + " of " + std::to_string(key.size()) +
                      " bytes with a value of " + std::to_string(value.size()) +
                      " bytes exceeds the limit of " + std::to_string(kMaxItem) +
                      " bytes per key or value");
  }
  return Status();
}

Result<int64_t> parse_counter(std::string_view store, std::string_view key,
                              std::string_view value) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return Status(Code::kInvalidArgument, std::string(store) + ": add on key " + quote(key) +
                                              ": its value " + quote(value) +
                                              " is not an integer (was it set with set()?)");
  }
  return v;
}

Result<int64_t> add_checked(std::string_view store, std::string_view key, int64_t value,
                            int64_t delta) {
  int64_t out = 0;
  if (__builtin_add_overflow(value, delta, &out)) {
    return Status(Code::kInvalidArgument, std::string(store) + ": add on key " + quote(key) + ": " +
                                              std::to_string(value) + " + " +
                                              std::to_string(delta) + " overflows int64");
  }
  return out;
}

Result<bool> poll_until(const std::function<Result<bool>()>& probe, Nanos timeout) {
  Deadline deadline(bounded(timeout));
  Nanos sleep = Millis(1);
  for (;;) {
    GW_ASSIGN_OR_RETURN(bool done, probe());
    if (done) return true;
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::min(sleep, deadline.remaining()));
    sleep = std::min<Nanos>(sleep * 2, Millis(50));
  }
}

Result<std::vector<int>> missing_ranks(Store& store, std::span<const std::string> keys) {
  std::vector<int> missing;
  for (size_t r = 0; r < keys.size(); ++r) {
    GW_ASSIGN_OR_RETURN(bool there, store.check(keys.subspan(r, 1)));
    if (!there) missing.push_back(static_cast<int>(r));
  }
  return missing;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += ", ";
    if (i == 32) return out + "and " + std::to_string(ranks.size() - 32) + " more";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace gw::store

namespace gw {

Status wait_ranks(Store& store, std::span<const std::string> keys, Nanos timeout,
                  std::string_view what) {
  Status waited = store.wait(keys, timeout);
  if (waited.code() != Code::kTimeout) return waited;
  GW_ASSIGN_OR_RETURN(auto missing, store::missing_ranks(store, keys));
  if (missing.empty()) return waited;  // they came in after the timeout: keep the store's text
  std::vector<std::string> keys_missing;
  for (int r : missing) keys_missing.push_back(keys[static_cast<size_t>(r)]);
  auto ms = std::chrono::duration_cast<Millis>(timeout).count();
  return Status(Code::kTimeout,
                std::string(missing.size() == 1 ? "rank " : "ranks ") + store::join_ranks(missing) +
                    " did not " + std::string(what) + " within " + std::to_string(ms) +
                    " ms (still missing " + store::key_list(keys_missing) +
                    "): stopped, hung, or slower than the timeout? (a killed rank would have " +
                    "been reported at once over a launched job's TCP store)")
      .with_rank(missing.front());
}

Status store_barrier(Store& store, const std::string& prefix, int rank, int size, Nanos timeout) {
  Deadline deadline(store::bounded(timeout));
  GW_RETURN_IF_ERROR(store.set(prefix + "/" + std::to_string(rank), "1"));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + "/" + std::to_string(r));
  return wait_ranks(store, keys, deadline.remaining(), "reach the store barrier '" + prefix + "'");
}

}  // namespace gw
