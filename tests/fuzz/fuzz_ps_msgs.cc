// The parameter server's receive side (lib/ps: the worker's key table checked by the server,
// control messages such as pulls and byes, pushed gradients) fed by a worker it cannot trust.
// Rank 0 is a real PsServer holding two keys; rank 1 is the harness, which sends the input's
// messages with the PS tags before the server starts (they wait as unexpected messages).
// Each input gets fresh groups over tcp.
// Input: mode byte (consistency), then messages: a kind byte (low 2 bits: control, table,
// push, pull; the rest: the tag's low bits), a u16 length and that many bytes.
#include <cstdlib>
#include <thread>
#include <vector>

#include "fuzz_group.h"
#include "fuzz_util.h"
#include "gw_group.h"
#include "gw_ps.h"
#include "gw_store.h"
#include "ps_impl.h"

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  gw::PsOptions o;
  o.mode = static_cast<gw::Consistency>(in.u8() % 3);
  o.staleness = 1;
  o.timeout = gw::Millis(5);  // junk never completes the setup: what an input costs (as coll)
  const gw::KeySpec keys[] = {{1, 8}, {2, 100}};

  auto [g0, g1] = gw::fuzz::two_groups();

  std::vector<std::string> msgs;
  std::vector<gw::SendRequest> sends;
  msgs.reserve(16);
  while (in.size() > 0 && msgs.size() < 16) {
    const uint8_t kind = in.u8();
    const uint64_t tag = gw::ps::tag(static_cast<gw::ps::TagKind>(kind & 3), kind >> 2);
    msgs.emplace_back(in.take(in.u16() % 4096));
    sends.push_back({msgs.back().data(), msgs.back().size(), tag, msgs.size(), nullptr});
  }
  if (!sends.empty()) (void)g1->endpoint(0).post_send(sends);
  {
    gw::Completion c[16];
    for (int i = 0; i < 4; ++i) (void)g1->transport().cq().poll(c);
  }
  auto server = gw::PsServer::create(*g0, keys, o, gw::make_sum_updater());
  if (server.ok()) (void)(*server)->serve(gw::Millis(5));
  if (server.ok()) server->reset();
  g0.reset();
  g1.reset();
  return 0;
}
