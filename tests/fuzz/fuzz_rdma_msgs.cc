// rdma's header messages (eager, rendezvous request, clear-to-send, reject, window, receive
// advertisement) as the receiving endpoint validates them (check_msg in rdma_wire.h), against a
// send slot and connection shape taken from the input. Every message check_msg lets through
// must be one the endpoint can act on without reading or writing out of bounds: the invariants
// below are what rdma_progress.cc relies on after the check.
// Input: lanes (1 byte), eager_bytes (2), payload (2), send slot present/used/awaiting/windowed
// (1), win_next (8), send length (8), then the 48-byte MsgHdr.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fuzz_util.h"
#include "rdma_wire.h"

using namespace gw::drv::rdma;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

uint64_t u64(gw::fuzz::Input& in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{in.u8()} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  const size_t lanes = 1 + in.u8() % kMaxQps;
  const uint64_t eager_bytes = in.u16();
  const size_t payload = in.u16();
  const uint8_t flags = in.u8();
  SendView view{(flags & 2) != 0, (flags & 4) != 0, (flags & 8) != 0, u64(in), u64(in)};
  const SendView* send = flags & 1 ? &view : nullptr;
  MsgHdr h;
  std::string_view raw = in.take(sizeof h);
  std::memcpy(&h, raw.data(), raw.size());

  const char* bad = check_msg(h, payload, eager_bytes, lanes, send);
  if (bad) return 0;
  require(h.version == kWireVersion);
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kEager:  // the payload is copied out as h.len bytes of a receive buffer
      require(h.len == payload && h.len <= eager_bytes);
      break;
    case MsgType::kRts:
      require(payload == 0 && h.len > 0);
      break;
    case MsgType::kCts:  // h.stripes writes of the send's bytes into [addr, addr + len)
      require(send && send->used && send->awaiting_cts && payload == 0);
      require(h.stripes >= 1 && h.stripes <= lanes && h.stripes <= send->len);
      require(h.len >= send->len && h.rkey != 0);
      break;
    case MsgType::kReject:
      require(send && send->used && send->awaiting_cts && payload == 0);
      break;
    case MsgType::kWin:  // one write of [tag, tag + len) of the send
      require(send && send->used && (send->awaiting_cts || send->windowed) && payload == 0);
      require(h.len > 0 && h.tag <= send->len && h.tag + h.len <= send->len &&
              h.tag + h.len > h.tag && h.stripes == 1 && h.rkey != 0);
      break;
    case MsgType::kAdv:
      require(payload == 0 && h.len > 0 && h.rkey != 0 && h.stripes >= 1 && h.stripes <= lanes &&
              h.stripes <= h.len && h.tag != ~uint64_t{0});
      break;
    default:
      std::abort();  // an unknown type got through
  }
  return 0;
}
