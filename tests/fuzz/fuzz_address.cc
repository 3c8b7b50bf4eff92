// Address::from_bytes and the tcp/rdma address payload (decode_addr): both read blobs that
// come from peers through the Store. A parsed address must survive a round trip through make().
#include <cstdlib>
#include <cstring>

#include "fuzz_util.h"
#include "gw_socket.h"
#include "gw_transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto a = gw::Address::from_bytes(in);
  if (!a.ok()) return 0;
  if (a->bytes() != in || a->payload().size() != size - gw::Address::kHeader) std::abort();
  auto b = gw::Address::make(a->driver(), a->version(), a->payload());
  if (a->driver().size() > 8 || !b.ok() || b->driver() != a->driver() ||
      b->version() != a->version() || b->payload().size() != a->payload().size() ||
      std::memcmp(b->payload().data(), a->payload().data(), a->payload().size()) != 0)
    std::abort();
  auto s = gw::decode_addr(a->payload().data(), a->payload().size());
  if (s.ok()) {
    uint8_t out[19];
    size_t n = gw::encode_addr(*s, out);
    if (n != a->payload().size() || std::memcmp(out, a->payload().data(), n) != 0) std::abort();
    (void)s->to_string();
  }
  return 0;
}
