// Inputs and sequential references for the all-reduce family's tests.
//
// make_input() produces small integers (sum/avg in [-2, 2], prod in {-1, 1, 2} with at
// most three 2s per element, min/max in [-9, 9]; shifted non-negative for uint8), which
// every dtype represents exactly and whose reductions over up to 16 ranks stay exact in
// every association. So any correct algorithm must reproduce the sequential reference
// bit for bit, not just within a tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/reduce.h"

namespace tributary::testing {

using Bytes = std::vector<std::byte>;

inline void store_value(DType dtype, double v, std::byte* at) {
  switch (dtype) {
    case DType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
      return;
    }
    case DType::kFloat64: std::memcpy(at, &v, 8); return;
    case DType::kFloat16: {
      const float f = static_cast<float>(v);
      float_to_half(&f, at, 1);
      return;
    }
    case DType::kBFloat16: {
      const float f = static_cast<float>(v);
      float_to_bfloat16(&f, at, 1);
      return;
    }
    case DType::kInt8: {
      const auto x = static_cast<std::int8_t>(v);
      std::memcpy(at, &x, 1);
      return;
    }
    case DType::kUInt8: {
      const auto x = static_cast<std::uint8_t>(v);
      std::memcpy(at, &x, 1);
      return;
    }
    case DType::kInt32: {
      const auto x = static_cast<std::int32_t>(v);
      std::memcpy(at, &x, 4);
      return;
    }
    case DType::kInt64: {
      const auto x = static_cast<std::int64_t>(v);
      std::memcpy(at, &x, 8);
      return;
    }
  }
}

inline double load_value(DType dtype, const std::byte* at) {
  switch (dtype) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, at, 4);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, at, 8);
      return d;
    }
    case DType::kFloat16: {
      float f;
      half_to_float(at, &f, 1);
      return f;
    }
    case DType::kBFloat16: {
      float f;
      bfloat16_to_float(at, &f, 1);
      return f;
    }
    case DType::kInt8: {
      std::int8_t x;
      std::memcpy(&x, at, 1);
      return x;
    }
    case DType::kUInt8: {
      std::uint8_t x;
      std::memcpy(&x, at, 1);
      return x;
    }
    case DType::kInt32: {
      std::int32_t x;
      std::memcpy(&x, at, 4);
      return x;
    }
    case DType::kInt64: {
      std::int64_t x;
      std::memcpy(&x, at, 8);
      return static_cast<double>(x);
    }
  }
  return 0;
}

inline double exact_value(ReduceOp op, DType dtype, int rank, std::size_t i) {
  const long r = rank;
  const long k = static_cast<long>(i % 1000003);
  const bool is_unsigned = dtype == DType::kUInt8;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return static_cast<double>((r * 7 + k * 3) % 5 - (is_unsigned ? 0 : 2));
    case ReduceOp::kProd:
      if ((k + r) % 7 == 0) return 2;
      return (!is_unsigned && (k * (r + 1)) % 5 == 0) ? -1 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return static_cast<double>((r * 13 + k * 7) % 19 - (is_unsigned ? 0 : 9));
  }
  return 0;
}

inline Bytes make_input(DType dtype, ReduceOp op, int rank, std::size_t count) {
  Bytes out(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    store_value(dtype, exact_value(op, dtype, rank, i), out.data() + i * dtype_size(dtype));
  }
  return out;
}

// Uniform floats in [-1, 1): reductions round, so algorithms differ from the reference
// in the last bits (but never from each other across ranks).
inline Bytes make_random_input(DType dtype, int rank, std::size_t count, unsigned seed) {
  std::mt19937 gen(seed * 7919u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Bytes out(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i)
    store_value(dtype, dist(gen), out.data() + i * dtype_size(dtype));
  return out;
}

// Reduced in rank order 0..n-1 with the production kernels, scaled once for avg.
inline Bytes reference_reduce(const std::vector<Bytes>& inputs, std::size_t count, DType dtype,
                              ReduceOp op) {
  Bytes acc = inputs[0];
  for (std::size_t r = 1; r < inputs.size(); ++r)
    reduce_into(acc.data(), inputs[r].data(), count, dtype, op);
  if (op == ReduceOp::kAvg && count > 0)
    scale_by_count(acc.data(), count, dtype, static_cast<int>(inputs.size()));
  return acc;
}

// "" when equal, else where and how they first differ.
inline std::string first_difference(const Bytes& got, const Bytes& want, DType dtype) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  const std::size_t es = dtype_size(dtype);
  for (std::size_t i = 0; i < got.size(); i += es) {
    if (std::memcmp(got.data() + i, want.data() + i, es) != 0) {
      std::ostringstream s;
      s << "element " << i / es << ": got " << load_value(dtype, got.data() + i) << ", want "
        << load_value(dtype, want.data() + i);
      return s.str();
    }
  }
  return "";
}

}  // namespace tributary::testing
