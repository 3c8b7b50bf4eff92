// The TCP store server (lib/bootstrap/tcp_store_server.cc) reading requests from a client it
// cannot trust: the input is written raw to a fresh connection, then the client half-closes
// and reads whatever the server answers. The server runs in its own thread, as in rank 0.
// A fresh server per input: a session that HELLOs and closes without BYE marks its rank as
// left for the server's lifetime (tcp_store_proto.h), which would change every later input.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "gw_auth.h"
#include "gw_store.h"

namespace {
std::unique_ptr<gw::TcpStoreServer>& server() {
  static std::unique_ptr<gw::TcpStoreServer> s;
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  server().reset();
  auto s = gw::TcpStoreServer::start("127.0.0.1", 0);
  if (!s.ok()) std::abort();
  server() = std::move(*s);
  int fd = gw::fuzz::dial_loopback(server()->port());
  if (fd < 0) {  // the server stopped accepting: a failure of the server
    std::perror("fuzz_store_server: connect to the store server");
    std::abort();
  }
  uint8_t ch[gw::auth::kClientHello];  // pass the authentication (no key) to reach requests
  gw::auth::keyless_hello(ch);
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(ch), sizeof ch});
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(data), size});
  ::shutdown(fd, SHUT_WR);
  // A parked get/wait answers only at its timeout; 20 ms bounds one input's cost.
  gw::fuzz::drain_until_eof(fd, 20);
  ::close(fd);
  // Stopped before libFuzzer's leak check: a server thread still running then was caught
  // growing its poll list, and LeakSanitizer took the vector's new buffer for a leak.
  server().reset();
  return 0;
}
