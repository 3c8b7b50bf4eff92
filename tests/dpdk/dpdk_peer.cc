// Peer process of the DPDK multi-process tests: opens the transport given on the command line,
// joins a two-rank group over a file store and runs one transfer plan (or streams receives
// until killed). Exit status 0 = every message arrived bit-exact.
//   gw_dpdk_peer SPEC STORE_DIR RANK MODE [REPS]    MODE: plan | jumbo | sink
// (jumbo: the plan with the sizes around memif's jumbo frames)
#include <cstdio>
#include <string>

#include "dpdk_test_util.h"
#include "gw_store.h"
#include "gw_transport.h"

int main(int argc, char** argv) {
  using namespace gw;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s SPEC STORE_DIR RANK plan|jumbo|sink [REPS]\n", argv[0]);
    return 2;
  }
  std::string spec = argv[1], dir = argv[2], mode = argv[4];
  int rank = std::stoi(argv[3]);
  int reps = argc > 5 ? std::stoi(argv[5]) : 1;
  auto fail = [&](const char* what, const Status& st) {
    std::fprintf(stderr, "gw_dpdk_peer rank %d: %s: %s\n", rank, what, st.to_string().c_str());
    return 1;
  };
  auto store = make_file_store(dir);
  if (!store.ok()) return fail("file store", store.status());
  auto t = Transport::open(spec);
  if (!t.ok()) return fail(("open " + spec).c_str(), t.status());
  auto g = Group::create(*store, std::move(t).value(), rank, 2, std::chrono::seconds(60));
  if (!g.ok()) return fail("Group::create", g.status());
  const int peer = 1 - rank;
  if (mode == "sink") {  // receive forever (until killed or the peer goes away)
    std::vector<uint8_t> buf(8 << 20);
    for (;;) {
      RecvRequest r{buf.data(), buf.size(), 0, 0, nullptr};
      auto took = (*g)->endpoint(peer).post_recv({&r, 1});
      if (!took.ok()) return fail("post_recv", took.status());
      Completion c[4];
      for (bool done = false; !done;) {
        auto n = (*g)->transport().cq().wait(c, std::chrono::seconds(30));
        if (!n.ok()) return fail("wait", n.status());
        for (size_t i = 0; i < *n; ++i) done |= c[i].op == Op::kRecv;
      }
    }
  }
  const auto sizes = mode == "jumbo" ? dpdktest::jumbo_sizes() : dpdktest::default_sizes();
  Status st = dpdktest::run_plan(**g, peer, sizes, reps, std::chrono::seconds(120));
  if (!st.ok()) return fail("transfer", st);
  // Stay until the peer is done too: its last acks may still be on the way.
  st = dpdktest::finish(**g, peer, std::chrono::seconds(60));
  return st.ok() ? 0 : fail("waiting for the peer to finish", st);
}
