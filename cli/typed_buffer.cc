#include "cli/typed_buffer.h"

#include <cstdint>
#include <cstring>

#include "core/reduce.h"

namespace tributary::cli {

void TypedBuffer::set(std::size_t i, double v) {
  std::byte* p = bytes_.data() + i * dtype_size(dtype_);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  const auto f = static_cast<float>(v);
  switch (dtype_) {
    case DType::kFloat32: return put(f);
    case DType::kFloat64: return put(v);
    case DType::kFloat16: return float_to_half(&f, p, 1);
    case DType::kBFloat16: return float_to_bfloat16(&f, p, 1);
    case DType::kInt8: return put(static_cast<std::int8_t>(v));
    case DType::kUInt8: return put(static_cast<std::uint8_t>(v));
    case DType::kInt32: return put(static_cast<std::int32_t>(v));
    case DType::kInt64: return put(static_cast<std::int64_t>(v));
  }
}

}  // namespace tributary::cli
