/// @file gw_ps_layout.h
/// How a parameter server spreads keyed tensors over k servers. Keys are ordered by key value
/// and laid end to end; server s owns the elements [N·s/k, N·(s+1)/k) of that sequence, so
/// each server holds one contiguous key range and the load is even. A key that crosses a
/// boundary is cut there (a large tensor is partitioned across servers); a piece smaller than
/// min_part elements is merged into its neighbour, so small keys are never split.
/// Thread-safety: immutable after make(); safe to share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "gw_status.h"

namespace gw {

/// One keyed tensor of float32 parameters.
struct KeySpec {
  uint64_t key = 0;
  uint64_t count = 0;  ///< elements (float32)
};

/// One piece of a key, held by one server.
struct PsPart {
  uint32_t key_index = 0;  ///< index into PsLayout::keys()
  uint32_t server = 0;     ///< 0..servers-1 (also the server's rank)
  uint64_t offset = 0;     ///< first element of the key in this piece
  uint64_t count = 0;      ///< elements
};

class PsLayout {
 public:
  /// Largest number of parts a layout may have (they are named by 24 bits on the wire).
  static constexpr size_t kMaxParts = size_t{1} << 24;

  PsLayout() = default;
  /// @param min_part smallest piece a key is cut into, in elements (>= 1).
  /// @return InvalidArgument for no keys, a duplicate key, a key of 0 elements, servers < 1 or
  ///         too many parts.
  static Result<PsLayout> make(std::span<const KeySpec> keys, int servers, uint64_t min_part);

  /// Keys as declared.
  const std::vector<KeySpec>& keys() const { return keys_; }
  /// All parts; those of one key are contiguous and in offset order.
  const std::vector<PsPart>& parts() const { return parts_; }
  /// Index of the first part of key_index, and how many it has.
  uint32_t first_part(uint32_t key_index) const { return first_[key_index]; }
  uint32_t num_parts(uint32_t key_index) const { return nparts_[key_index]; }
  /// Index of `key` in keys(), if declared.
  std::optional<uint32_t> find(uint64_t key) const;
  int servers() const { return servers_; }
  uint64_t min_part() const { return min_part_; }
  /// Elements held by `server`.
  uint64_t elements_on(int server) const { return load_[static_cast<size_t>(server)]; }
  uint64_t total_elements() const { return total_; }

 private:
  std::vector<KeySpec> keys_;
  std::vector<PsPart> parts_;
  std::vector<uint32_t> first_, nparts_;
  std::vector<uint64_t> load_;
  std::unordered_map<uint64_t, uint32_t> index_;
  int servers_ = 0;
  uint64_t min_part_ = 1;
  uint64_t total_ = 0;
};

}  // namespace gw
