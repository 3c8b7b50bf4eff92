// Names of element types and reduction operators.
#include <utility>

#include "gw_dtypes.h"

namespace gw {
namespace {

template <class E, size_t N>
std::optional<E> find_name(std::string_view name, const std::pair<const char*, E> (&table)[N]) {
  for (auto& [n, v] : table) {
    if (name == n) return v;
  }
  return std::nullopt;
}

constexpr std::pair<const char*, DataType> kDtypeNames[] = {
    {"float32", DataType::kFloat32},   {"float", DataType::kFloat32},  {"fp32", DataType::kFloat32},
    {"float64", DataType::kFloat64},   {"double", DataType::kFloat64}, {"fp64", DataType::kFloat64},
    {"float16", DataType::kFloat16},   {"half", DataType::kFloat16},   {"fp16", DataType::kFloat16},
    {"bfloat16", DataType::kBFloat16}, {"bf16", DataType::kBFloat16},  {"int32", DataType::kInt32},
    {"int", DataType::kInt32},         {"int64", DataType::kInt64},    {"uint8", DataType::kUInt8},
    {"byte", DataType::kUInt8}};
constexpr std::pair<const char*, ReduceOp> kOpNames[] = {{"sum", ReduceOp::kSum},
                                                         {"prod", ReduceOp::kProd},
                                                         {"min", ReduceOp::kMin},
                                                         {"max", ReduceOp::kMax},
                                                         {"avg", ReduceOp::kAvg}};
}  // namespace

const char* dtype_name(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUInt8:
      return "uint8";
  }
  return "unknown";
}

const char* op_name(ReduceOp op) {
  for (auto& [n, v] : kOpNames) {
    if (v == op) return n;
  }
  return "unknown";
}

std::optional<DataType> parse_dtype(std::string_view name) { return find_name(name, kDtypeNames); }
std::optional<ReduceOp> parse_op(std::string_view name) { return find_name(name, kOpNames); }

}  // namespace gw
