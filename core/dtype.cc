#include "core/dtype.h"

namespace tributary {

std::string_view to_string(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "invalid";
}

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "invalid";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "float32" || s == "float" || s == "f32" || s == "fp32") return DType::kFloat32;
  if (s == "float64" || s == "double" || s == "f64" || s == "fp64") return DType::kFloat64;
  if (s == "float16" || s == "half" || s == "f16" || s == "fp16") return DType::kFloat16;
  if (s == "bfloat16" || s == "bf16") return DType::kBFloat16;
  if (s == "int8" || s == "i8") return DType::kInt8;
  if (s == "uint8" || s == "u8") return DType::kUInt8;
  if (s == "int32" || s == "i32" || s == "int") return DType::kInt32;
  if (s == "int64" || s == "i64") return DType::kInt64;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  if (s == "sum") return ReduceOp::kSum;
  if (s == "prod") return ReduceOp::kProd;
  if (s == "min") return ReduceOp::kMin;
  if (s == "max") return ReduceOp::kMax;
  if (s == "avg" || s == "mean") return ReduceOp::kAvg;
  return std::nullopt;
}

bool is_valid_dtype(std::uint8_t raw) { return raw < kNumDTypes; }
bool is_valid_reduce_op(std::uint8_t raw) { return raw < kNumReduceOps; }

}  // namespace tributary
