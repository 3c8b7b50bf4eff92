// The TCP store client (lib/bootstrap/tcp_store_client.cc) reading replies from a server it
// cannot trust. The harness plays the server: it accepts the client's connection, writes the
// input as the reply stream and half-closes; the client then makes up to four requests (the
// first input byte picks them; its bit 6 makes the client a rank, whose session HELLO reads the
// first reply) and parses what comes back. A request that fails ends the run:
// its connection is gone, and the client would dial again for the next one.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
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

// Plays the server on the next connection: answers the authentication, sends `bytes`,
// half-closes. @return the connection, or -1.
int serve(std::string_view bytes) {
  int fd = ::accept4(g_listen, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return -1;
  uint8_t ch[gw::auth::kClientHello], sh[gw::auth::kServerHello];
  if (::recv(fd, ch, sizeof ch, MSG_WAITALL) != static_cast<ssize_t>(sizeof ch)) return fd;
  (void)gw::auth::Server(nullptr, "store", nullptr, 0).on_hello(ch, sh);
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(sh), sizeof sh});
  gw::fuzz::write_all(fd, bytes);
  ::shutdown(fd, SHUT_WR);
  return fd;
}

// The length of the first frame of `in` (header included, cut at the end of the input).
size_t first_frame(std::string_view in) {
  if (in.size() < 8) return in.size();
  uint64_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint64_t{static_cast<unsigned char>(in[4 + i])} << (8 * i);
  return static_cast<size_t>(std::min<uint64_t>(in.size(), 8 + len));
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  uint8_t ops = in.u8();
  // Bit 6: a ranked client. Its session connection reads the first frame (the answer to its
  // HELLO); its requests go over a second connection that reads the rest.
  const bool ranked = ops & 0x40;
  std::string_view rest = in.rest();
  std::string_view first = ranked ? rest.substr(0, first_frame(rest)) : rest;
  rest.remove_prefix(ranked ? first.size() : rest.size());
  // The client waits for the answer to its authentication: the server's half in a thread.
  int fd = -1, fd2 = -1;
  std::thread server([&] { fd = serve(first); });
  const gw::StoreIdentity who{ranked ? 1 : -1, ranked ? 0 : -1};
  auto store = gw::connect_tcp_store("127.0.0.1", g_port, gw::Millis(2000), who);
  server.join();
  if (fd < 0 || (!store.ok() && !ranked)) std::abort();
  if (!store.ok()) {  // the HELLO got a bad answer: refused, as it should be
    ::close(fd);
    return 0;
  }
  if (ranked) server = std::thread([&] { fd2 = serve(rest); });
  const std::string keys[] = {"k", "rank/1/addr"};
  auto& s = **store;
  for (int i = 0; i < 4; ++i) {
    bool ok = false;
    const int op = i == 0 && (ops & 0x80) ? 4 : (ops >> (2 * i)) & 3;  // 4: set first
    switch (op) {
      case 0:
        ok = s.get("k", gw::Millis(10)).ok();
        break;
      case 1:
        ok = s.add("ctr", 1).ok();
        break;
      case 2:
        ok = s.wait(keys, gw::Millis(10)).ok();
        break;
      case 3:
        ok = s.check(keys).ok();
        break;
      default:
        ok = s.set("k", "v").ok();
        break;
    }
    if (!ok) break;
  }
  if (server.joinable()) server.join();
  ::close(fd);
  if (fd2 >= 0) ::close(fd2);
  return 0;
}
