/// @file gw_dtypes.h
/// Element types and reduction operators: what the collectives reduce and what a device table's
/// reduction kernels take (gw_device.h), so both depend on lib/common, not on each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gw {

/// Element type of a collective's buffers.
enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat64,
  kFloat16,   ///< IEEE binary16; reduced in float32, rounded to nearest even
  kBFloat16,  ///< bfloat16; reduced in float32, rounded to nearest even
  kInt32,
  kInt64,
  kUInt8,
};
inline constexpr int kNumDataTypes = 7;

/// Reduction operator. Integer sum and prod wrap modulo 2^bits (two's complement). kAvg is the
/// sum divided by the number of ranks once, at the end (integers: truncating division).
enum class ReduceOp : uint8_t { kSum = 0, kProd, kMin, kMax, kAvg };
inline constexpr int kNumReduceOps = 5;

/// Bytes per element.
constexpr size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kFloat64:
    case DataType::kInt64:
      return 8;
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kUInt8:
      return 1;
  }
  return 0;
}

/// "float32", "bfloat16", ... as nccl-tests and PyTorch spell them.
const char* dtype_name(DataType t);
/// "sum", "prod", "min", "max", "avg".
const char* op_name(ReduceOp op);
/// Parse the names above (also "half", "bf16", "fp32", "double", "int", ...).
std::optional<DataType> parse_dtype(std::string_view name);
std::optional<ReduceOp> parse_op(std::string_view name);

}  // namespace gw
