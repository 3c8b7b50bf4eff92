/// @file fuzz_ps_setup.h
/// What the PS targets without a group (fuzz_ps_table, fuzz_ps_msgs_core) read first: the
/// server's settings and layout. Input: mode, servers, staleness, min_part, then how many of
/// kKeys the layout declares.
#pragma once

#include <cstdlib>
#include <iterator>

#include "fuzz_util.h"
#include "ps_impl.h"

namespace gw::fuzz {

inline constexpr KeySpec kPsKeys[] = {{1, 8}, {2, 100}, {7, 1}, {uint64_t{1} << 40, 3}};

struct PsSetup {
  ps::Settings s;
  size_t nkeys = 0;  ///< the first nkeys of kPsKeys
  PsLayout layout;
};

inline PsSetup read_ps_setup(Input& in) {
  ps::Settings s;
  s.o.mode = static_cast<Consistency>(in.u8() % 3);
  s.o.servers = 1 + in.u8() % 3;
  s.o.staleness = in.u8() % 4;
  s.o.on_loss = PsOnLoss::kContinue;  // as ps.on_loss settles by default
  s.min_part = 1 + in.u8() % 8;
  const size_t nkeys = 1 + in.u8() % std::size(kPsKeys);
  auto layout = PsLayout::make({kPsKeys, nkeys}, s.o.servers, s.min_part);
  if (!layout.ok()) std::abort();  // these keys always make a layout
  return {s, nkeys, std::move(*layout)};
}

}  // namespace gw::fuzz
