/// @file coll_desc.h
/// A collective call's signature (Desc), which peers compare so that mismatched calls fail
/// naming both sides, and the wire's unit numbering that carries it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gw_status.h"

namespace gw::coll {

enum class Kind : uint8_t {
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kBroadcast,
  kBarrier,
  kSend,  ///< point-to-point (coll_p2p.cc): not a collective, takes no sequence number
  kRecv,
  kAlltoall,  ///< coll_xchg.cc (pairwise) or coll_bruck.cc (small blocks)
  kAlltoallv,
  kGather,
  kScatter,
};
const char* kind_name(Kind k);

/// Signature of a call, sent to peers when coll.check_args is on: mismatched calls fail with
/// a message naming both sides instead of corrupting data or hanging.
struct Desc {
  uint32_t magic = 0;
  uint8_t kind = 0, dtype = 0, op = 0, algo = 0;
  uint8_t device = 0;  ///< 1: device buffers (a rank mixing them with host buffers is caught)
  /// 1: a mismatch relayed (rd::relay): this Desc is rank `origin`'s call and the next one
  /// the call of the rank it disagreed with (its `origin`).
  uint8_t relayed = 0;
  uint16_t origin = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint32_t seq = 0;
  bool operator==(const Desc&) const = default;
};
std::string describe(const Desc& d);
/// "allreduce #3(...) on rank 1 of 4": where a call's errors come from.
std::string where(const Desc& mine, int rank, int n);
/// The check of a call descriptor `d` (`len` bytes, as received from `peer`) against this
/// rank's `mine`: OK only for the same call; else InvalidArgument naming both calls (or the
/// pair a relayed mismatch carries, when `len` holds two). Reads `d` only within `len`.
/// Pure (no Communicator): fuzz_coll_desc_core calls it as Communicator::Impl does.
Status check_desc(const Desc& mine, int rank, int n, int peer, const Desc* d, size_t len);

/// Unit numbers at or above this carry a descriptor, not data.
inline constexpr uint32_t kHdrUnit = 0x40000000u;
/// Header unit of the descriptor a ring sends backwards (to the previous rank) when it has more
/// than two ranks: with both neighbours checking, every rank of three sees every other's call.
/// Units 0..3 are the forward headers (one per hierarchy phase).
inline constexpr int kBackHdr = 4;

/// Recursive-doubling messages are [Desc, padding | data]: the descriptor rides with the data
/// (one message per step instead of two), and all of them use the tag of header unit 0 — each
/// direction between two ranks carries at most one per collective, and a peer that runs the
/// ring instead meets its own header unit 0, so the mismatch is reported, not waited out.
inline constexpr size_t kRdHdr = 64;
static_assert(sizeof(Desc) <= kRdHdr);

}  // namespace gw::coll
