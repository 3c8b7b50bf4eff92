/// @file gw_driver_options.h
/// The option keys every driver has, declared once: each driver reads them under its own name
/// (tcp.cq_depth, dpdk.cq_depth, rdma.cq_depth) into its options struct, and says where its
/// defaults or help differ (CommonOptionText).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "gw_options.h"

namespace gw::core {

/// What a driver may say differently about the common keys.
struct CommonOptionText {
  const char* cq_depth_help = "completions held before poll() drains them";
  const char* unexpected_help =
      "buffer for messages that arrive before their receive; beyond it the sender waits";
  const char* staging_chunk_default = "524288";
  const char* staging_chunk_help =
      "CUDA device memory is staged through pinned host slots of this size";
  const char* staging_slots_help =
      "pinned staging slots per endpoint (send) and per transport (receive)";
  int64_t staging_slots_max = 4096;
};

/// The common keys as rows of a table of `O`. `Path` (member pointers, maybe none) leads from
/// an `O` to the driver's options, whose fields unexpected_bytes, max_message,
/// max_outstanding, cq_depth and staging (StagingPool::Options) they fill.
template <class O, auto... Path>
constexpr std::array<OptionDef<O>, 6> common_options(const CommonOptionText& t) {
  using D = std::remove_cvref_t<decltype((std::declval<O&>().*....*Path))>;
  using S = decltype(D::staging);
  using Def = OptionDef<O>;
  return {{
      Def::integer("unexpected_bytes", "67108864", 0, INT64_MAX, to<Path..., &D::unexpected_bytes>,
                   t.unexpected_help),
      Def::integer("max_message_bytes", "1099511627776", 1, INT64_MAX, to<Path..., &D::max_message>,
                   "largest message accepted"),
      Def::integer("max_outstanding", "1024", 1, 1 << 20, to<Path..., &D::max_outstanding>,
                   "posted sends (and receives) per endpoint"),
      Def::integer("cq_depth", "65536", 16, 1 << 24, to<Path..., &D::cq_depth>, t.cq_depth_help),
      Def::integer("staging_chunk_bytes", t.staging_chunk_default, 4096, 1 << 30,
                   to<Path..., &D::staging, &S::chunk_bytes>, t.staging_chunk_help),
      Def::integer("staging_slots", "8", 1, t.staging_slots_max,
                   to<Path..., &D::staging, &S::slots>, t.staging_slots_help),
  }};
}

}  // namespace gw::core
