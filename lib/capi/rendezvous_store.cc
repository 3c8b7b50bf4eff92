// A gw::Store over the caller's rendezvous callbacks (gw_rendezvous_t), so a host framework's
// own store carries the address exchange. Only what Group::create needs: set, get, wait, check.
#include <algorithm>
#include <cstring>
#include <vector>

#include "capi_impl.h"

namespace gw::capi {
namespace {

// Keys reach C as NUL-terminated strings: one with a NUL inside cannot be passed.
Result<std::string> c_key(std::string_view key) {
  if (key.find('\0') != std::string_view::npos)
    return invalid("rendezvous: a key with a NUL byte cannot be passed to the callbacks");
  return std::string(key);
}

int64_t to_ms(Nanos t) { return std::max<int64_t>(0, (t.count() + 999'999) / 1'000'000); }

class CallbackStore final : public Store {
 public:
  explicit CallbackStore(const gw_rendezvous_t& r) : r_(r) {}

  Status set(std::string_view key, std::string_view value) override {
    GW_ASSIGN_OR_RETURN(std::string k, c_key(key));
    int rc = r_.set(r_.user, k.c_str(), value.data(), value.size());
    return rc == 0 ? Status() : failed("set", "\"" + k + "\"", rc);
  }

  Result<std::string> get(std::string_view key, Nanos timeout) override {
    GW_ASSIGN_OR_RETURN(std::string k, c_key(key));
    GW_RETURN_IF_ERROR(wait_keys({&k, 1}, timeout));
    std::string v(256, '\0');
    for (int tries = 0; tries < 4; ++tries) {
      size_t len = 0;
      int rc = r_.get(r_.user, k.c_str(), v.data(), v.size(), &len);
      if (rc == GW_RDZV_TOO_SMALL && len > v.size()) {
        v.resize(len);
        continue;
      }
      if (rc != 0) return failed("get", "\"" + k + "\"", rc);
      if (len > v.size())
        return invalid("rendezvous: get(\"" + k + "\") reported more bytes than fit");
      v.resize(len);
      return v;
    }
    return invalid("rendezvous: get(\"" + k + "\") kept asking for a larger buffer");
  }

  Result<int64_t> add(std::string_view key, int64_t) override {
    return Status(Code::kNotSupported,
                  "rendezvous: add(\"" + std::string(key) + "\") is not in gw_rendezvous_t");
  }

  Status wait(std::span<const std::string> keys, Nanos timeout) override {
    return wait_keys(keys, timeout);
  }

  Result<bool> check(std::span<const std::string> keys) override {
    Status st = wait_keys(keys, Nanos(0));
    if (st.code() == Code::kTimeout) return false;
    if (!st.ok()) return st;
    return true;
  }

 private:
  Status wait_keys(std::span<const std::string> keys, Nanos timeout) {
    std::vector<const char*> ptrs;
    for (auto& k : keys) {
      GW_RETURN_IF_ERROR(c_key(k).status());
      ptrs.push_back(k.c_str());
    }
    const int64_t ms = to_ms(timeout);
    int rc = r_.wait(r_.user, ptrs.data(), ptrs.size(), ms);
    if (rc == 0) return Status();
    std::string names;
    for (auto& k : keys) names += (names.empty() ? "\"" : ", \"") + k + "\"";
    if (rc == GW_RDZV_TIMEOUT) {
      return Status(Code::kTimeout, "rendezvous: keys " + names + " not all set after " +
                                        std::to_string(ms) + " ms");
    }
    return failed("wait", names, rc);
  }

  static Status failed(const char* what, const std::string& key, int rc) {
    return Status(Code::kUnavailable, std::string("rendezvous: ") + what + "(" + key +
                                          ") callback returned " + std::to_string(rc));
  }

  gw_rendezvous_t r_;
};

}  // namespace

std::shared_ptr<Store> make_callback_store(const gw_rendezvous_t& r) {
  return std::make_shared<CallbackStore>(r);
}

}  // namespace gw::capi
