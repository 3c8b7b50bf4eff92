// The TCP store client (lib/bootstrap/tcp_store_client.cc) reading replies from a server it
// cannot trust. The harness plays the server: it accepts the client's connection, writes the
// input as the reply stream and half-closes; the client then makes up to four requests (the
// first input byte picks them) and parses what comes back. A request that fails ends the run:
// its connection is gone, and the client would dial again for the next one.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "fuzz_util.h"
#include "gw_auth.h"
#include "gw_store.h"

namespace {
int g_listen = -1;
uint16_t g_port = 0;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  setenv("GW_STORE_IO_TIMEOUT_MS", "2000", 1);  // a stuck read shows up as a slow input
  g_listen = gw::fuzz::listen_loopback(g_port);
  if (g_listen < 0) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  uint8_t ops = in.u8();
  // The client waits for the answer to its authentication: the server's half in a thread.
  int fd = -1;
  std::thread server([&] {
    fd = ::accept4(g_listen, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    uint8_t ch[gw::auth::kClientHello], sh[gw::auth::kServerHello];
    if (::recv(fd, ch, sizeof ch, MSG_WAITALL) != static_cast<ssize_t>(sizeof ch)) return;
    (void)gw::auth::Server(nullptr, "store", nullptr, 0).on_hello(ch, sh);
    gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(sh), sizeof sh});
    gw::fuzz::write_all(fd, in.rest());
    ::shutdown(fd, SHUT_WR);
  });
  auto store = gw::connect_tcp_store("127.0.0.1", g_port, gw::Millis(2000));
  server.join();
  if (!store.ok() || fd < 0) std::abort();
  const std::string keys[] = {"k", "rank/1/addr"};
  auto& s = **store;
  for (int i = 0; i < 4; ++i) {
    bool ok = false;
    const int op = i == 0 && (ops & 0x80) ? 4 : (ops >> (2 * i)) & 3;  // 4: set first
    switch (op) {
      case 0: ok = s.get("k", gw::Millis(10)).ok(); break;
      case 1: ok = s.add("ctr", 1).ok(); break;
      case 2: ok = s.wait(keys, gw::Millis(10)).ok(); break;
      case 3: ok = s.check(keys).ok(); break;
      default: ok = s.set("k", "v").ok(); break;
    }
    if (!ok) break;
  }
  ::close(fd);
  return 0;
}
