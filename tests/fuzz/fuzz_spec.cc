// Transport specs ("tcp:streams=4,iface=lo"): the driver name, then device arguments that
// Config::apply_kvargs splits (parse_kvargs) and checks against each section's keys. Specs of
// the tcp driver (and unknown drivers) also go through Transport::open itself; dpdk, rdma and
// auto are left out there because they start the EAL or probe devices once per process.
#include <cstdlib>
#include <string>

#include "fuzz_util.h"
#include "gw_config.h"
#include "gw_transport.h"

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kSections[] = {"tcp", "dpdk", "rdma", "coll", "ps", "store", "transport"};
  gw::fuzz::Input in(data, size);
  const char* section = kSections[in.u8() % std::size(kSections)];
  std::string_view args = in.rest();
  // One Config for the run: apply_kvargs checks each key and value on its own and only
  // overwrites entries, so what earlier inputs set changes nothing (a copy per input was ~10%).
  static auto global = gw::Config::global();
  if (!global.ok()) std::abort();
  gw::Config& c = *global;
  auto st = c.apply_kvargs(section, args);
  if (!st.ok() && st.message().empty()) std::abort();  // every refusal must say why
  std::string_view spec = args;
  std::string_view name = spec.substr(0, spec.find(':'));
  if (name == "dpdk" || name == "rdma" || name == "auto" || name == "cuda") return 0;
  auto t = gw::Transport::open(spec);
  if (!t.ok() && t.status().message().empty()) std::abort();
  return 0;
}
