// The parameter server's check of a worker's key table (ps::check_table, ps_server.cc: what
// PsServer::Impl::check_tables runs on every table it receives), without a group: the
// settings and layout come from the input. fuzz_ps_msgs reaches the same check through a
// real server at ~300 exec/s; this one runs ~10^4 a second.
// Input: mode byte, servers byte, staleness byte, min_part byte, layout byte (how many of
// fuzz_ps_setup.h's keys the server declares), then the table as received.
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_ps_setup.h"

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const auto [s, nkeys, layout] = gw::fuzz::read_ps_setup(in);
  const auto& kKeys = gw::fuzz::kPsKeys;
  std::string_view table = in.rest();
  // Aligned, as the server's receive buffer is.
  std::vector<uint64_t> buf(table.size() / 8 + 1);
  std::memcpy(buf.data(), table.data(), table.size());
  const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
  std::string why = gw::ps::check_table(s, layout, p, table.size());
  if (!why.empty()) return 0;
  // Accepted: what the server goes on to rely on. The header's options are its own, the
  // length is exactly the keys announced, and every declared key is there with its count.
  gw::ps::TableHeader h;
  if (table.size() < sizeof h) std::abort();
  std::memcpy(&h, p, sizeof h);
  if (h.mode != static_cast<uint8_t>(s.o.mode) || h.servers != s.o.servers ||
      h.min_part != s.min_part || table.size() != sizeof h + h.nkeys * sizeof(gw::KeySpec))
    std::abort();
  for (size_t k = 0; k < nkeys; ++k) {
    bool found = false;
    for (uint64_t i = 0; i < h.nkeys && !found; ++i) {
      gw::KeySpec e;
      std::memcpy(&e, p + sizeof h + i * sizeof e, sizeof e);
      if (e.key == kKeys[k].key && e.count != kKeys[k].count) std::abort();
      found = e.key == kKeys[k].key;
    }
    if (!found) std::abort();
  }
  return 0;
}
