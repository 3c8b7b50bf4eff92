/// @file dpdk_addr.h
/// The DPDK transport's Address payload (after the 9-byte Address header), version 2: MAC (6),
/// IPv4 (4, network order), UDP port (2, network order), ring-bus index (1; 0xff when not on a
/// ring bus), the number of links K (1), then the MAC of links 1..K-1 (6 each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dpdk_links.h"

namespace gw::drv::dpdk {

inline constexpr uint8_t kAddrVersion = 2;
inline constexpr size_t kAddrBase = 14;
inline constexpr size_t kAddrMax = kAddrBase + 6 * (kMaxLinks - 1);
inline constexpr uint8_t kNoRing = 0xff;
/// The payload size of an address with `links` links.
constexpr size_t addr_size(int links) { return kAddrBase + 6 * static_cast<size_t>(links - 1); }

/// A transport's Address payload: MACs (link 0 first), IPv4 and UDP port in network order,
/// its ring-bus slot or kNoRing.
struct AddrPayload {
  uint8_t mac[kMaxLinks][6] = {};
  uint32_t ip = 0;
  uint16_t port = 0;
  uint8_t ring = kNoRing;
  uint8_t links = 1;
};
/// Writes addr_size(a.links) bytes.
inline void encode_addr(const AddrPayload& a, uint8_t* p) {
  std::memcpy(p, a.mac[0], 6);
  std::memcpy(p + 6, &a.ip, 4);
  std::memcpy(p + 10, &a.port, 2);
  p[12] = a.ring;
  p[13] = a.links;
  for (int k = 1; k < a.links; ++k) std::memcpy(p + kAddrBase + 6 * (k - 1), a.mac[k], 6);
}
/// @return false when `n` bytes are not an address of 1..kMaxLinks links.
inline bool decode_addr(const uint8_t* p, size_t n, AddrPayload* a) {
  if (n < kAddrBase || p[13] < 1 || p[13] > kMaxLinks || n != addr_size(p[13])) return false;
  std::memcpy(a->mac[0], p, 6);
  std::memcpy(&a->ip, p + 6, 4);
  std::memcpy(&a->port, p + 10, 2);
  a->ring = p[12];
  a->links = p[13];
  for (int k = 1; k < a->links; ++k) std::memcpy(a->mac[k], p + kAddrBase + 6 * (k - 1), 6);
  return true;
}

}  // namespace gw::drv::dpdk
