// The TCP store server's request handling (store::StoreCore, the code the real server runs
// between its socket reads and writes) fed bytes without a socket or a thread: ~100x the rate
// of fuzz_store_server, which keeps the sockets and the poll loop covered. Two clients and a
// virtual clock reach what one connection in 20 ms could not: a rank's session that leaves
// while another client waits, a SET that wakes another's GET, waits of any length timing out.
// Input: segments of ctl:u8 len:u16le bytes[len]; a short tail goes to client 0 whole.
//   ctl bit 0: the client (0 or 1), created at its first segment with a keyless
//     authentication hello in front, unless bit 3 is set (the bytes are the authentication);
//   bit 1: then let time pass to the latest parked deadline; bit 2: then that client hangs up;
//   bit 4 of the first segment: the server has a key (a keyless client is then refused).
// At the end time passes until no wait is parked, then both hang up (the server's EOF).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "gw_auth.h"
#include "tcp_store_core.h"

namespace {

class Core final : public gw::store::StoreCore {
 public:
  explicit Core(gw::auth::KeyPtr key) : StoreCore("fuzz", std::move(key)) {}

 private:
  // Every reply is taken at once, as a client that reads keeps the server's sends whole.
  void flush(gw::store::Client& c) override {
    c.out.clear();
    c.out_off = 0;
  }
  void send_last(gw::store::Client&, const uint8_t*, size_t) override {}
};

gw::Clock::time_point latest_deadline(const Core& core) {
  gw::Clock::time_point t{};
  for (auto& c : core.clients())
    if (c->waiting && !c->closed && c->deadline > t) t = c->deadline;
  return t;
}

void step(Core& core, gw::store::Client& c, std::string_view bytes) {
  // The server reads 64 KiB at a time and handles frames between reads.
  for (size_t off = 0; off < bytes.size() && !c.closed; off += 64 * 1024) {
    core.received(c, bytes.substr(off, 64 * 1024));
    if (!c.closed) core.handle_frames(c);
  }
}

}  // namespace

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto key = std::make_shared<const std::string>("fuzz-key");
  Core core(size && (data[0] & 16) ? key : nullptr);
  gw::store::Client* cl[2] = {nullptr, nullptr};
  auto client = [&](int i, bool hello) -> gw::store::Client& {
    if (!cl[i]) {
      cl[i] = &core.add_client(gw::Fd(), "client" + std::to_string(i));
      if (hello) {
        uint8_t ch[gw::auth::kClientHello];
        gw::auth::keyless_hello(ch);
        step(core, *cl[i], {reinterpret_cast<const char*>(ch), sizeof ch});
      }
    }
    return *cl[i];
  };
  gw::fuzz::Input in(data, size);
  while (in.size() >= 3) {
    uint8_t ctl = in.u8();
    size_t len = in.u16();
    auto& c = client(ctl & 1, !(ctl & 8));
    step(core, c, in.take(len));
    if (ctl & 2) core.expire(latest_deadline(core));
    if (ctl & 4) core.hang_up(c);
    for (auto* o : cl)  // a reply or a hang-up of one client may let the other go on
      if (o && !o->closed) core.handle_frames(*o);
  }
  if (in.size()) step(core, client(0, true), in.rest());
  // Parked waits end (in virtual time) and the frames behind them are handled; every round
  // ends the parked waits, so each takes at least one frame: the loop ends.
  for (;;) {
    auto t = latest_deadline(core);
    if (t == gw::Clock::time_point{}) break;
    core.expire(t);
    for (auto* o : cl)
      if (o && !o->closed) core.handle_frames(*o);
  }
  for (auto* o : cl)
    if (o) core.hang_up(*o);
  core.sweep();
  if (!core.clients().empty()) std::abort();
  return 0;
}
