// The tcp driver's receive path: hello checks on the listening socket, then frame headers,
// matching and reassembly of chunks into posted receives (drivers/tcp/tcp_recv.cc). Each
// input gets a fresh endpoint (its own key) on one long-lived transport; junk hellos go to a
// second one (a valid one would stay parked: renewed every 256) and any-source receives to a
// third (renewed when an input leaves one posted).
// Input: mode byte, then for each of (mode & 3) receives a size (u16) and a tag byte, then the
// bytes a peer sends. Mode bit 7: the bytes are the peer's hello itself; else a valid hello
// for one stream goes first and the bytes follow on the connected stream.
#include <cstdlib>
#include <memory>
#include <vector>

#include "fuzz_recvs.h"
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
// Never sleeps: on loopback the peer's bytes are queued before its send() returns.
// @return the receives completed.
size_t pump(gw::Transport& t, gw::Endpoint* ep, const gw::fuzz::Receives& r, int rounds) {
  gw::Completion c[16];
  size_t done = 0;
  for (int i = 0; i < rounds; ++i) {
    auto n = t.cq().poll(c);
    if (!n.ok()) return done;
    for (size_t k = 0; k < *n; ++k) {
      done += c[k].op == gw::Op::kRecv;
      // A receive never reports more bytes than its buffer holds.
      if (c[k].ep == ep && !r.fits(c[k])) std::abort();
    }
    if (ep && !ep->status().ok()) return done;  // failed or closed: nothing more will come
  }
  return done;
}

std::unique_ptr<gw::Transport> g_data;   // for inputs past the hello
std::unique_ptr<gw::Transport> g_hello;  // for junk hellos; renewed now and then (below)
std::unique_ptr<gw::Transport> g_any;    // for any-source receives; renewed when one is left
uint64_t g_key = 0, g_hellos = 0;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  g_data = open_tcp();
  g_any = open_tcp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const uint8_t mode = in.u8();
  const gw::fuzz::Receives r(in, mode & 3);
  if (mode & 0x80) {  // junk as the hello: the transport reads it before any connect()
    // A junk hello that is valid stays parked (with its socket) for the transport's life:
    // a fresh transport every 256 such inputs bounds that, without paying an open per input.
    if (g_hellos++ % 256 == 0) g_hello.reset(), g_hello = open_tcp();
    gw::Transport* t = g_hello.get();
    int fd = gw::fuzz::dial_loopback(port_of(*t));
    if (fd < 0) std::abort();
    gw::fuzz::write_all(fd, in.rest());
    ::shutdown(fd, SHUT_WR);
    pump(*t, nullptr, r, 4);
    ::close(fd);
    return 0;
  }
  // Any-source receives belong to the transport and would outlive this input's buffers: their
  // transport is replaced when one is still posted at the end (most inputs leave none).
  const bool any = mode & 0x40;
  gw::Transport* t = any ? g_any.get() : g_data.get();
  int fd = gw::fuzz::dial_loopback(port_of(*t));
  if (fd < 0) std::abort();
  const uint64_t key = ++g_key;
  auto h = gw::drv::tcp::make_hello(key, 1, 0);
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(&h), sizeof h});
  uint8_t ch[gw::auth::kClientHello];  // a peer without a key, as the transport has none
  gw::auth::keyless_hello(ch);
  gw::fuzz::write_all(fd, {reinterpret_cast<const char*>(ch), sizeof ch});
  // Let progress accept the stream and park its hello first: connect() finding nothing parked
  // sleeps 10 ms on the transport's epoll, which would be most of an input's cost.
  gw::Completion none[1];
  for (int i = 0; i < 4; ++i) (void)t->cq().poll({none, 0});
  auto ep = t->connect({t->address(), key, false, 1, "fuzz peer"}, gw::Deadline(gw::Millis(2000)));
  if (!ep.ok()) std::abort();  // a valid hello must connect
  size_t posted = 0;
  if (!r.reqs.empty()) {
    auto k = any ? t->post_recv_any(r.reqs) : (*ep)->post_recv(r.reqs);
    posted = k.ok() ? *k : 0;
  }
  gw::fuzz::write_all(fd, in.rest());
  ::shutdown(fd, SHUT_WR);
  const size_t done = pump(*t, ep->get(), r, 64);
  ::close(fd);
  if (any && done < posted) {
    ep->reset();
    g_any = open_tcp();
  }
  return 0;
}
