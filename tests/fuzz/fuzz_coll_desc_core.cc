// The collectives' check of the call descriptor a peer sends (coll::check_desc, which
// coll::Poster::check_desc runs on every header message and recursive-doubling
// message, and coll::describe of whatever it names), without a group: this rank's call comes
// from the input. fuzz_coll_desc reaches the same check through a real Communicator at
// ~50 exec/s.
// Input: kind, dtype, op, algo, flags (bit 0: device, bit 1: overlay), count u16, seq, root,
// rank, ranks, peer bytes, then the received bytes (at most three descriptors' worth). With
// the overlay bit the received bytes are XORed over copies of this rank's descriptor, so
// near-matches and relayed pairs are a few bit flips away.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "coll_impl.h"
#include "fuzz_util.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gw::coll::Desc;
  gw::fuzz::Input in(data, size);
  // This rank's call, as Communicator::Impl::begin fills it.
  Desc mine{.magic = 0x67776331u,
            .kind = static_cast<uint8_t>(in.u8() % 11),  // every coll::Kind
            .dtype = static_cast<uint8_t>(in.u8() % 7),
            .op = static_cast<uint8_t>(in.u8() % 5),
            .algo = static_cast<uint8_t>(in.u8() % 4)};
  const uint8_t flags = in.u8();
  mine.device = flags & 1;
  mine.count = in.u16();
  mine.seq = in.u8();
  mine.root = in.u8() % 8;
  const int n = 1 + in.u8() % 64;
  const int rank = in.u8() % n;
  const int peer = in.u8() % n;

  // Exactly the received bytes on the heap: ASan catches a read past `len`.
  const size_t len = std::min(in.size(), 3 * sizeof(Desc));
  std::unique_ptr<uint8_t[]> buf(new uint8_t[len]);
  const std::string_view raw = in.take(len);
  for (size_t i = 0; i < len; ++i) {
    uint8_t base = 0;
    if (flags & 2) std::memcpy(&base, reinterpret_cast<const uint8_t*>(&mine) + i % sizeof mine, 1);
    buf[i] = base ^ static_cast<uint8_t>(raw[i]);
  }
  const auto* d = reinterpret_cast<const Desc*>(buf.get());

  const gw::Status st = gw::coll::check_desc(mine, rank, n, peer, d, len);
  if (st.ok()) {
    // Accepted: the peer called exactly this collective (count, dtype, op, algo, root, buffers,
    // sequence number), which is what lets the engines take its data lengths as their own.
    Desc got;
    require(len >= sizeof got);
    std::memcpy(&got, d, sizeof got);
    require(got == mine);
    return 0;
  }
  // Refused: an InvalidArgument that names this rank's call first and ends with the advice.
  require(st.code() == gw::Code::kInvalidArgument);
  const std::string m(st.message());
  const std::string where = gw::coll::where(mine, rank, n) + ": rank ";
  require(m.compare(0, where.size(), where) == 0);
  require(ends_with(m, "all with host or all with device buffers"));
  require(m.size() < 2048);  // describe() of any bytes stays short
  if (len < sizeof(Desc)) require(m.find("called something else but") != std::string::npos);
  return 0;
}
