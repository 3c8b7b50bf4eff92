/// @file dpdk_cksum.h
/// UDP checksum over an mbuf chain, summing 32-bit words into 64-bit accumulators (the
/// compiler vectorises the loop). DPDK 22.11's rte_raw_cksum adds 16-bit words one at a time;
/// over every payload byte on both sides it was the largest cost of a memif stream.
/// Thread-safety: pure functions.
#pragma once

#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_ip.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

namespace gw::drv::dpdk {

/// One's-complement partial sum of `n` bytes at `p` (little-endian words), not folded.
inline uint64_t raw_sum(const uint8_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (; n >= 16; p += 16, n -= 16) {
    uint32_t w[4];
    std::memcpy(w, p, 16);
    s0 += w[0];
    s1 += w[1];
    s2 += w[2];
    s3 += w[3];
  }
  for (; n >= 4; p += 4, n -= 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    s0 += w;
  }
  if (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    s1 += w;
    p += 2;
    n -= 2;
  }
  if (n) s2 += *p;  // the low byte of a little-endian word
  return s0 + s1 + s2 + s3;
}

inline uint16_t fold_sum(uint64_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(s);
}

/// Sum of the UDP datagram (from `l4_off` to the end of the chain) and its pseudo-header.
/// A segment that starts at an odd byte of the datagram is byte-swapped into place.
inline uint16_t udp_sum(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) {
  uint64_t sum = rte_ipv4_phdr_cksum(ip, 0);
  size_t pos = 0;
  for (const rte_mbuf* s = m; s; s = s->next) {
    const auto* p = rte_pktmbuf_mtod(s, const uint8_t*);
    size_t n = s->data_len;
    if (l4_off >= n) {
      l4_off -= static_cast<uint32_t>(n);
      continue;
    }
    p += l4_off;
    n -= l4_off;
    l4_off = 0;
    uint16_t part = fold_sum(raw_sum(p, n));
    if (pos & 1) part = static_cast<uint16_t>(part << 8 | part >> 8);
    sum += part;
    pos += n;
  }
  return fold_sum(sum);
}

/// The UDP checksum to write into a datagram whose checksum field is zero.
inline uint16_t udp_cksum(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) {
  uint16_t c = static_cast<uint16_t>(~udp_sum(m, ip, l4_off));
  return c == 0 ? 0xffff : c;
}

/// True when the datagram's checksum (non-zero) is right.
inline bool udp_cksum_ok(const rte_mbuf* m, const rte_ipv4_hdr* ip, uint32_t l4_off) {
  return udp_sum(m, ip, l4_off) == 0xffff;
}

}  // namespace gw::drv::dpdk
