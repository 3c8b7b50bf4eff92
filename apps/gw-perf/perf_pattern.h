/// @file perf_pattern.h
/// --check payloads: every 8-byte word is splitmix64(seed + word index), the seed made from the
/// phase, the message index and the direction, so a byte that lands in the wrong message, at the
/// wrong offset or from the wrong direction is caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gw::perf {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Seed of message `index` of phase `seq`, sent by rank `dir`.
inline uint64_t pattern_seed(uint64_t seq, uint64_t index, uint32_t dir) {
  return splitmix64((seq << 40) ^ (uint64_t{dir} << 36) ^ index) & ~uint64_t{0xFFFFFFFF};
}

inline void pattern_fill(uint8_t* p, size_t n, uint64_t seed) {
  size_t words = n / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = splitmix64(seed + w);
    std::memcpy(p + 8 * w, &v, 8);
  }
  if (n % 8 != 0) {
    uint64_t v = splitmix64(seed + words);
    std::memcpy(p + 8 * words, &v, n % 8);
  }
}

/// Number of bytes of `p` that differ from the pattern.
inline uint64_t pattern_errors(const uint8_t* p, size_t n, uint64_t seed) {
  uint64_t errors = 0;
  size_t words = (n + 7) / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = splitmix64(seed + w);
    uint8_t want[8];
    std::memcpy(want, &v, 8);
    size_t len = w + 1 < words || n % 8 == 0 ? 8 : n % 8;
    if (std::memcmp(want, p + 8 * w, len) == 0) continue;
    for (size_t b = 0; b < len; ++b) errors += want[b] != p[8 * w + b];
  }
  return errors;
}

}  // namespace gw::perf
