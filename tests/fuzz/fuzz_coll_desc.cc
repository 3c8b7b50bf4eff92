// The collectives' receive side (lib/coll: check_desc for the call descriptor every rank sends
// first, then the ring and recursive-doubling length checks and reductions) fed by a peer it
// cannot trust. Rank 0 is a real Communicator; rank 1 is the harness, which sends the input's
// messages with the tags of rank 0's first collective. Each input gets fresh groups over tcp
// (a communicator is broken after its first error).
// Input: call byte (kind, algo), count byte, dtype byte, op byte, then messages: a selector
// byte (bit 7: a descriptor unit, kHdrUnit + low bits; else a data unit), a u16 length and
// that many bytes.
#include <cstdlib>
#include <thread>
#include <vector>

#include "coll_impl.h"
#include "fuzz_group.h"
#include "fuzz_util.h"
#include "gw_coll.h"

namespace {
constexpr uint64_t kTagFirstCall = (0xC0ull << 56) | (uint64_t{1} << 32);  // make_tag(1, 0)
}  // namespace

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const uint8_t call = in.u8();
  const size_t count = 1 + in.u8() % 64;
  const auto dt = static_cast<gw::DataType>(in.u8() % 7);
  const auto op = static_cast<gw::ReduceOp>(in.u8() % 5);

  auto [g0, g1] = gw::fuzz::two_groups();
  gw::CommOptions o;
  o.check_args = 1;
  o.chunk_bytes = 64;  // several ring units even for small counts
  // Junk never completes a call: this is what an input costs. 5 ms, not the 1 ms minimum: a
  // nice-19 fuzzer on shared cores loses the CPU for ms at a time, and the messages must be
  // read before the deadline for coverage to be reproducible.
  o.timeout = gw::Millis(5);
  auto comm = gw::Communicator::create(*g0, o);
  if (!comm.ok()) std::abort();

  // Rank 1's messages first: they wait in rank 0's unexpected storage or its receives.
  std::vector<std::string> msgs;
  std::vector<gw::SendRequest> sends;
  msgs.reserve(16);  // requests point into the strings
  while (in.size() > 0 && msgs.size() < 16) {
    const uint8_t sel = in.u8();
    const uint32_t unit = sel & 0x80 ? gw::coll::kHdrUnit + (sel & 7) : sel;
    msgs.emplace_back(in.take(in.u16() % 4096));
    sends.push_back(
        {msgs.back().data(), msgs.back().size(), kTagFirstCall | unit, msgs.size(), nullptr});
  }
  if (!sends.empty()) (void)g1->endpoint(0).post_send(sends);

  std::vector<uint8_t> a(count * 8 * 2, 1), b(count * 8 * 2);
  gw::CallOptions co;
  co.algo = call & 0x10 ? gw::Algo::kRecursiveDoubling : gw::Algo::kRing;
  gw::Result<gw::CollHandle> h = gw::Status(gw::Code::kInternal, "no call");
  switch (call % 5) {
    case 0:
      h = (*comm)->allreduce_async(a.data(), b.data(), count, dt, op, co);
      break;
    case 1:
      h = (*comm)->reduce_scatter_async(a.data(), b.data(), count / 2 + 1, dt, op);
      break;
    case 2:
      h = (*comm)->allgather_async(a.data(), b.data(), count / 2 + 1, dt);
      break;
    case 3:
      h = (*comm)->broadcast_async(b.data(), count, dt, (call >> 5) & 1);
      break;
    default:
      h = (*comm)->barrier_async();
      break;
  }
  if (h.ok()) {
    gw::Completion c[16];
    gw::Deadline dl(gw::Millis(20));
    for (;;) {
      auto done = (*comm)->test(*h);
      (void)g1->transport().cq().poll(c);  // rank 1 takes rank 0's sends off the wire
      if (!done.ok() || *done || dl.expired()) break;
      std::this_thread::yield();
    }
    (void)(*comm)->wait(*h, gw::Millis(1));
  }
  // Before the buffers go: requests in flight point into them.
  comm->reset();
  g0.reset();
  g1.reset();
  return 0;
}
