// Element types and reduction operators at the type-erased boundary: collectives take
// (bytes, DType, ReduceOp) and only the innermost loops are specialised per type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tributary {

enum class DType : std::uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,   // IEEE 754 binary16
  kBFloat16 = 3,  // bfloat16: float32 with the low 16 mantissa bits dropped
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
};
inline constexpr int kNumDTypes = 8;

enum class ReduceOp : std::uint8_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kAvg = 4,  // sum, then divided by the number of contributors at the end
};
inline constexpr int kNumReduceOps = 5;

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

std::string_view to_string(DType t);
std::string_view to_string(ReduceOp op);
std::optional<DType> parse_dtype(std::string_view name);         // "float32", "f32", "bf16", ...
std::optional<ReduceOp> parse_reduce_op(std::string_view name);  // "sum", "avg", ...
// Validates a wire value before it is cast to the enum.
bool is_valid_dtype(std::uint8_t raw);
bool is_valid_reduce_op(std::uint8_t raw);

}  // namespace tributary
