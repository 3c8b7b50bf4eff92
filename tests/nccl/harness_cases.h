/// @file harness_cases.h
/// Test cases and benchmarks of the NCCL plugin harness; each runs in every rank process after
/// the mesh is connected. A case dies (exit 1, with the reason) on the first wrong result.
#pragma once

#include <string>

#include "harness_net.h"

namespace gw::nccltest {

struct Ctx {
  std::string dir;  ///< per-run directory: handles and barriers
  int ranks = 2;
  int rounds = 2;  ///< basic: rounds of the full message set
};

/// All pairs, many outstanding isend/irecv with tags, grouped receives, byte checks.
void case_basic(Net& net, Mesh& m, const Ctx& ctx);
/// 2 ranks: a message longer than the receive buffer fails that receive, nothing else.
void case_mismatch(Net& net, Mesh& m, const Ctx& ctx);
/// 2 ranks: rank 1 is SIGKILLed mid-transfer; rank 0's requests fail in bounded time.
void case_death(Net& net, Mesh& m, const Ctx& ctx);
/// 2 ranks: registrations of bad ranges and types are refused; the comm stays usable.
void case_badreg(Net& net, Mesh& m, const Ctx& ctx);
/// 2 ranks: ping-pong latency, 8 B .. 4 KiB; rank 0 prints one row per size.
void bench_lat(Net& net, Mesh& m, const Ctx& ctx);
/// 2 ranks: rank 0 streams to rank 1 with 32 requests in flight, 64 KiB .. 4 MiB.
void bench_bw(Net& net, Mesh& m, const Ctx& ctx);

}  // namespace gw::nccltest
