/// @file gw_coll_types.h
/// Algorithm names of the collectives; element types and reduction operators (gw_dtypes.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gw_dtypes.h"

namespace gw {

/// Allreduce algorithm. kAuto picks recursive doubling up to coll.rd_max_bytes; above it,
/// hierarchical when the Group spans several hosts with the same number (> 1) of ranks each,
/// else the ring. kHierarchical: reduce-scatter inside each host, allreduce of each rank's
/// part across hosts (one ring per local rank), allgather inside each host (coll_hier.cc).
enum class Algo : uint8_t { kAuto = 0, kRing, kRecursiveDoubling, kHierarchical };

/// "auto", "ring", "rd", "hier".
const char* algo_name(Algo a);
std::optional<Algo> parse_algo(std::string_view name);

}  // namespace gw
