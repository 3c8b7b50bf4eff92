/// @file fuzz_dpdk.h
/// What the dpdk targets share (fuzz_dpdk_frames, fuzz_dpdk_frames_core): a transport's place
/// on the ring bus, frames around a gradwire header with valid Ethernet/IPv4/UDP headers and
/// checksums, and a frame put on a receive ring as the ring PMD's rx burst takes it.
/// Thread-safety: none (one fuzzing thread).
#pragma once

#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dpdk_endpoint.h"
#include "dpdk_frame.h"
#include "dpdk_wire.h"

namespace gw::fuzz {

/// RTE_MBUF_DEFAULT_DATAROOM: a frame fits one mbuf, no chain.
inline constexpr size_t kDpdkMaxFrame = 2048;
inline constexpr size_t kDpdkOuter = drv::dpdk::kEthLen + drv::dpdk::kIpLen + drv::dpdk::kUdpLen;

/// The transport `spec` opens; aborts with its error (a target without its rig tests nothing).
inline std::unique_ptr<Transport> dpdk_open(const char* spec) {
  auto t = Transport::open(spec);
  if (!t.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec, t.status().to_string().c_str());
    std::abort();
  }
  return std::move(*t);
}

/// Where a transport is on the ring bus; frames from one to another (tests/dpdk/dpdk_frame.h).
using DpdkSide = dpdktest::Side;
inline DpdkSide dpdk_side(const Transport& t) { return dpdktest::side_of(t); }
inline std::vector<uint8_t> dpdk_wrap(const DpdkSide& from, const DpdkSide& to,
                                      std::string_view wire) {
  return dpdktest::wrap(from, to, wire);
}

/// What the input's flags ask of the gradwire header at the front of `wire` (if whole): unless
/// bit 1, the connection ids of `ep` and its peer (else the frame reaches no endpoint); bit 2:
/// the right magic, version and seg_len.
inline void dpdk_fix_header(std::string& wire, uint8_t flags, const drv::dpdk::DpdkEndpoint& ep) {
  using namespace drv::dpdk;
  if (wire.size() < sizeof(WireHdr)) return;
  WireHdr h;
  std::memcpy(&h, wire.data(), sizeof h);
  if (!(flags & 2)) {
    h.dst_conn = ep.conn();
    h.src_conn = ep.remote_conn();
  }
  if (flags & 4) {
    h.magic = kMagic;
    h.version = kVersion;
    h.seg_len = static_cast<uint16_t>(wire.size() - sizeof h);
  }
  std::memcpy(wire.data(), &h, sizeof h);
}

/// Puts `f` (at most kDpdkMaxFrame bytes) in an mbuf of `pool` on `ring`; a full ring loses it.
inline void dpdk_inject(rte_mempool* pool, rte_ring* ring, const std::vector<uint8_t>& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (!m) std::abort();
  char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
  if (!p) std::abort();
  if (!f.empty()) std::memcpy(p, f.data(), f.size());
  if (rte_ring_enqueue(ring, m) != 0) rte_pktmbuf_free(m);
}

}  // namespace gw::fuzz
