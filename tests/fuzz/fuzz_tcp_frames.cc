// The tcp driver's receive path: hello checks on the listening socket, then frame headers,
// matching and reassembly of chunks into posted receives (drivers/tcp/tcp_datapath.cc). Each
// input gets a fresh endpoint (its own key) on one long-lived transport; junk hellos (a valid
// one would stay parked for good) and any-source receives get a transport of their own.
// Input: mode byte, then for each of (mode & 3) receives a size (u16) and a tag byte, then the
// bytes a peer sends. Mode bit 7: the bytes are the peer's hello itself; else a valid hello
// for one stream goes first and the bytes follow on the connected stream.
#include <cstdlib>
#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "gw_auth.h"
#include "gw_socket.h"
#include "gw_transport.h"
#include "tcp_wire.h"

namespace {
std::unique_ptr<gw::Transport> open_tcp() {
  auto t = gw::Transport::open("tcp:iface=lo,family=inet,unexpected_bytes=1048576,cq_depth=256");
  if (!t.ok()) std::abort();
  return std::move(*t);
}

uint16_t port_of(const gw::Transport& t) {
  auto a = gw::decode_addr(t.address().payload().data(), t.address().payload().size());
  if (!a.ok()) std::abort();
  return ntohs(reinterpret_cast<const sockaddr_in&>(a->ss).sin_port);
}

// Polls until the endpoint fails (the peer's FIN or junk always ends it) or `rounds` run out.
void pump(gw::Transport& t, gw::Endpoint* ep, const std::vector<size_t>& caps, int rounds) {
  gw::Completion c[16];
  for (int i = 0; i < rounds; ++i) {
    auto n = t.cq().sleep_poll(c, 1);
    if (!n.ok()) return;
    for (size_t k = 0; k < *n; ++k) {
      // A receive never reports more bytes than its buffer holds.
      if (c[k].op == gw::Op::kRecv && c[k].code == gw::Code::kOk && c[k].ep == ep &&
          (c[k].wr_id >= caps.size() || c[k].len > caps[c[k].wr_id]))
        std::abort();
    }
    if (ep && !ep->status().ok()) return;  // failed or closed: nothing more will come
  }
}

std::unique_ptr<gw::Transport> g_data;  // for inputs past the hello
uint64_t g_key = 0;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  g_data = open_tcp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const uint8_t mode = in.u8();
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<gw::RecvRequest> recvs;
  std::vector<size_t> caps;
  for (int i = 0; i < (mode & 3); ++i) {
    size_t len = in.u16() % 8192;
    uint8_t tag = in.u8();
    bufs.emplace_back(len);
    caps.push_back(len);
    recvs.push_back({bufs.back().data(), len, tag == 0xff ? gw::kAnyTag : tag,
                     static_cast<uint64_t>(i), nullptr});
  }
  if (mode & 0x80) {  // junk as the hello: the transport reads it before any connect()
    auto t = open_tcp();
    int fd = gw::fuzz::dial_loopback(port_of(*t));
    if (fd < 0) std::abort();
    gw::fuzz::write_all(fd, in.rest());
    ::shutdown(fd, SHUT_WR);
    pump(*t, nullptr, caps, 3);
    ::close(fd);
    return 0;
  }
  // Any-source receives belong to the transport and would outlive this input's buffers.
  std::unique_ptr<gw::Transport> own = (mode & 0x40) ? open_tcp() : nullptr;
  gw::Transport* t = own ? own.get() : g_data.get();
  int fd = gw::fuzz::dial_loopback(port_of(*t));
  if (fd < 0) std::abort();
  const uint64_t key = ++g_key;
  auto h = gw::drv::tcp::make_hello(key, 1, 0);
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(&h), sizeof h});
  uint8_t ch[gw::auth::kClientHello];  // a peer without a key, as the transport has none
  gw::auth::keyless_hello(ch);
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(ch), sizeof ch});
  auto ep = t->connect({t->address(), key, false, 1, "fuzz peer"}, gw::Deadline(gw::Millis(2000)));
  if (!ep.ok()) std::abort();  // a valid hello must connect
  if (!recvs.empty()) {
    auto posted = (mode & 0x40) ? t->post_recv_any(recvs) : (*ep)->post_recv(recvs);
    (void)posted;
  }
  gw::fuzz::write_all(fd, in.rest());
  ::shutdown(fd, SHUT_WR);
  pump(*t, ep->get(), caps, 50);
  ::close(fd);
  return 0;
}
