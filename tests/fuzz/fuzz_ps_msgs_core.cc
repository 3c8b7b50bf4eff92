// The parameter server's checks of what a worker sends once the key tables matched
// (ps_impl.h: ctrl_ok on every control receive, check_pull on a pull, check_push on a push
// landed in a staging slot; PsServer::Impl's data path runs them), without a group: the
// settings, layout and this server's rank come from the input. fuzz_ps_msgs reaches them
// through a real server at ~300 exec/s, and only after a valid table.
// Input: mode, servers, staleness, min_part, layout (fuzz_ps_setup.h), this server's rank,
// workers; then up to 16 messages: a selector byte (bit 0: push, else control;
// control: bit 1 whole length, bit 2 our magic, bit 3 a pull; push: bit 1 completed OK) and the
// sender's rank byte, then for control a u16 length (unless whole) and the 256-byte message,
// for a push a part byte and a u32 length.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_ps_setup.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

uint32_t u32(gw::fuzz::Input& in) { return in.u16() | uint32_t{in.u16()} << 16; }

}  // namespace

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gw::ps::CtrlMsg;
  gw::fuzz::Input in(data, size);
  const gw::fuzz::PsSetup setup = gw::fuzz::read_ps_setup(in);
  const gw::ps::Settings& s = setup.s;
  const gw::PsLayout& layout = setup.layout;
  const int me = in.u8() % s.o.servers;
  const int ranks = s.o.servers + 1 + in.u8() % 4;
  // Which parts this server holds, as PsServer::Impl::setup numbers them.
  std::vector<int32_t> local(layout.parts().size(), -1);
  std::vector<uint32_t> held;
  for (uint32_t id = 0; id < layout.parts().size(); ++id) {
    if (layout.parts()[id].server != static_cast<uint32_t>(me)) continue;
    local[id] = static_cast<int32_t>(held.size());
    held.push_back(id);
  }

  for (int i = 0; i < 16 && in.size() > 0; ++i) {
    const uint8_t sel = in.u8();
    const int rank = in.u8() % ranks;  // the transport names a rank of the group
    if (sel & 1) {
      // A push completes only in a staging slot of a part held here.
      if (held.empty()) continue;
      const uint32_t part = held[in.u8() % held.size()];
      const auto code = sel & 2 ? gw::Code::kOk : gw::Code::kInvalidArgument;
      const size_t len = u32(in);
      const std::string why = gw::ps::check_push(s, layout, part, rank, code, len);
      if (!why.empty()) {
        require(why.size() < 512);
        continue;
      }
      // Applied: a worker's slot of exactly the part's floats (on_push indexes by worker).
      require(code == gw::Code::kOk && rank >= s.o.servers && rank < ranks);
      require(len == layout.parts()[part].count * sizeof(float));
      continue;
    }
    // A control receive: at most the posted 256 bytes (longer ones fail in the transport).
    const size_t len = sel & 2 ? sizeof(CtrlMsg) : in.u16() % (sizeof(CtrlMsg) + 1);
    CtrlMsg m;
    std::memset(&m, 0, sizeof m);
    const std::string_view raw = in.take(len);
    std::memcpy(&m, raw.data(), raw.size());
    if (sel & 4) m.magic = gw::ps::kMagic;
    if (sel & 8) m.type = static_cast<uint8_t>(gw::ps::MsgType::kPull);
    if (!gw::ps::ctrl_ok(m, len)) continue;
    require(len == sizeof m && m.magic == gw::ps::kMagic);
    if (m.type != static_cast<uint8_t>(gw::ps::MsgType::kPull)) continue;  // on_ctrl ignores
    const std::string why = gw::ps::check_pull(s, layout, local, rank, m);
    if (!why.empty()) {
      require(why.size() < 512);
      continue;
    }
    // Served or deferred: a worker's pull of a part held here (parts_[local[part]]), for the
    // bytes the reply sends from the shard, at a clock the int64 comparisons take as it is.
    require(rank >= s.o.servers && rank < ranks);
    require(m.part < local.size() && local[m.part] >= 0 &&
            static_cast<size_t>(local[m.part]) < held.size() && held[local[m.part]] == m.part);
    require(m.bytes == layout.parts()[m.part].count * sizeof(float));
    require(m.clock <= static_cast<uint64_t>(INT64_MAX));
  }
  return 0;
}
