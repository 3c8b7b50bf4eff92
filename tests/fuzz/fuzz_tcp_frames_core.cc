// The tcp driver's receive path without sockets (the pure twin of fuzz_tcp_frames): frame
// header checks (check_header), matching, stalls of chunks that come early on another stream,
// reassembly into posted and any-source receives and unexpected buffering, all in
// TcpEndpoint::read (drivers/tcp/tcp_recv.cc), unchanged. The peer's bytes are put in a
// stream's stage buffer, where a bulk read from its socket leaves them; with the stream not
// readable, read() handles what is staged and returns without calling recv(), as it does when
// the socket has nothing more. What this leaves to fuzz_tcp_frames: the listener's hello check,
// the socket reads themselves (direct reads of big payloads, EOF and reset handling).
// Input: mode byte, then for each of (mode & 3) receives a size (u16) and a tag byte, then
// segments: a byte (the stream, modulo the endpoint's 1 + (mode >> 2 & 3) streams), a length
// (u16) and that many bytes. After each segment every stream is driven as progress() does.
// Mode bit 4: the receives are posted after the last segment (matching what was buffered as
// unexpected); bit 6: they are any-source receives (on the transport). One transport serves
// every input: the endpoint goes with its input, and any-source receives still posted at the
// end are completed (TransportCore::fail_any, as an abort does), so none outlives its buffer.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_recvs.h"
#include "fuzz_util.h"
#include "gw_transport.h"
#include "tcp_endpoint.h"

namespace {
using gw::drv::tcp::Stream;
using gw::drv::tcp::TcpEndpoint;
using gw::drv::tcp::TcpTransport;

// TcpEndpoint::kStageSize (private there): what one bulk read may bring into the stage.
constexpr size_t kStage = 32 * 1024;

std::unique_ptr<gw::Transport> open_tcp() {
  // max_outstanding sizes the endpoint's send slots and queues, which no input uses.
  auto t = gw::Transport::open(
      "tcp:iface=lo,family=inet,unexpected_bytes=1048576,cq_depth=256,max_outstanding=16");
  if (!t.ok()) std::abort();
  return std::move(*t);
}

std::unique_ptr<gw::Transport> g_t;

// Drains the completion queue. A receive never reports more bytes than its buffer holds.
// @return the receives completed.
size_t drain(gw::Transport& t, const gw::fuzz::Receives& r) {
  gw::Completion c[16];
  size_t done = 0;
  for (;;) {
    auto n = t.cq().poll(c);
    if (!n.ok() || *n == 0) return done;
    for (size_t k = 0; k < *n; ++k) {
      if (!r.fits(c[k])) std::abort();
      done += c[k].op == gw::Op::kRecv;
    }
  }
}

// One pass of progress() over the streams: read() each with staged bytes or a stalled chunk.
// @return whether any stream's state moved.
bool drive(TcpEndpoint& ep) {
  bool moved = false;
  for (auto& sp : ep.streams_) {
    if (ep.failed()) break;
    Stream& s = *sp;
    if (s.stage_end <= s.stage_begin && s.rx != Stream::Rx::kStalled) continue;
    const size_t begin = s.stage_begin, end = s.stage_end;
    const auto rx = s.rx;
    ep.read(s);
    // What read() may leave: staged bytes within the stage, in order.
    if (s.stage_begin > s.stage_end || s.stage_end > kStage) std::abort();
    moved |= s.stage_begin != begin || s.stage_end != end || s.rx != rx;
  }
  return moved;
}

// Appends bytes to a stream's stage as a bulk read would: after what is still staged (moved to
// the front first, as read() does before it reads), at most what the stage holds.
void stage(Stream& s, std::string_view bytes) {
  if (s.stage_begin > 0) {
    std::memmove(s.stage.get(), s.stage.get() + s.stage_begin, s.stage_end - s.stage_begin);
    s.stage_end -= s.stage_begin;
    s.stage_begin = 0;
  }
  const size_t n = std::min(bytes.size(), kStage - s.stage_end);
  std::memcpy(s.stage.get() + s.stage_end, bytes.data(), n);
  s.stage_end += n;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gw::fuzz::quiet();
  g_t = open_tcp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const uint8_t mode = in.u8();
  const gw::fuzz::Receives r(in, mode & 3);
  const bool any = mode & 0x40, late = mode & 0x10;
  auto& t = static_cast<TcpTransport&>(*g_t);
  auto ep = std::make_unique<TcpEndpoint>(
      &t, gw::ConnectParams{t.address(), 1, false, 1, "fuzz peer"}, "fuzz peer");
  // The streams attach() would make, without a socket: never readable, so never read from.
  const size_t nstreams = 1 + (mode >> 2 & 3);
  for (size_t i = 0; i < nstreams; ++i) {
    auto s = std::make_unique<Stream>();
    s->kind = gw::drv::tcp::PollItem::kStream;
    s->ep = ep.get();
    s->readable = false;
    s->txq.init(17);  // max_outstanding + 1, as attach() sizes it
    s->stage.reset(new uint8_t[kStage]);
    ep->streams_.push_back(std::move(s));
  }
  size_t posted = 0;
  auto post = [&] {
    if (r.reqs.empty()) return;
    auto k = any ? t.post_recv_any(r.reqs) : ep->post_recv(r.reqs);
    posted = k.ok() ? *k : 0;
  };
  if (!late) post();
  size_t done = 0;
  while (in.size() > 0 && !ep->failed()) {
    const uint8_t which = in.u8();
    const size_t len = in.u16();
    stage(*ep->streams_[which % nstreams], in.take(len));
    for (int round = 0; round < 8 && drive(*ep); ++round) {
    }
    done += drain(t, r);
  }
  if (late) {
    post();
    for (int round = 0; round < 8 && drive(*ep); ++round) {
    }
  }
  done += drain(t, r);
  ep.reset();
  t.core().fail_any(gw::Code::kAborted);
  done += drain(t, r);
  if (done > posted) std::abort();  // every completion is one of this input's receives
  if (t.core().any_posted() != 0) std::abort();
  return 0;
}
