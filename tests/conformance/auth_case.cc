// Shared pieces of the authentication tests (auth_case.h).
#include "auth_case.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "gw_auth.h"

namespace gw::conformance {

std::pair<Result<std::unique_ptr<Endpoint>>, Result<std::unique_ptr<Endpoint>>> connect_pair(
    Transport& a, Transport& b, uint64_t key, Deadline dl) {
  std::optional<Result<std::unique_ptr<Endpoint>>> ba;
  std::thread th([&] { ba.emplace(b.connect({a.address(), key, false, 0, "transport A"}, dl)); });
  auto ab = a.connect({b.address(), key, true, 1, "transport B"}, dl);
  th.join();
  return {std::move(ab), std::move(*ba)};
}

bool KeyCase::right() const {
  return (!a_key && !b_key) || (a_key && b_key && !std::strcmp(a_key, b_key));
}

const std::vector<KeyCase>& key_cases() {
  static const std::vector<KeyCase> cases = {{"same_key", "k1", "k1"},
                                             {"no_keys", nullptr, nullptr},
                                             {"wrong_key", "k2", "k1"},
                                             {"missing_key", nullptr, "k1"},
                                             {"unexpected_key", "k1", nullptr}};
  return cases;
}

std::unique_ptr<Transport> open_with_key(const TransportCase& c, const char* key) {
  key ? ::setenv("GW_AUTH_KEY", key, 1) : ::unsetenv("GW_AUTH_KEY");
  auth::reload_key_for_test();
  auto t = open_case(c);
  ::unsetenv("GW_AUTH_KEY");
  auth::reload_key_for_test();
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(*t) : nullptr;
}

void expect_auth_refused(const Status& dialler, const Status& acceptor) {
  for (const Status& st : {dialler, acceptor}) {
    EXPECT_EQ(st.code(), Code::kUnavailable) << st.to_string();
    EXPECT_NE(st.message().find("authentication"), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find("GW_AUTH_KEY"), std::string::npos) << st.to_string();
  }
}

}  // namespace gw::conformance
