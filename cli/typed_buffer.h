// Writing doubles into a buffer of any DType, for building inputs and references.
#pragma once

#include <cstddef>
#include <vector>

#include "core/dtype.h"

namespace tributary::cli {

// A byte buffer of `count` elements of `dtype`.
class TypedBuffer {
 public:
  TypedBuffer(DType dtype, std::size_t count)
      : dtype_(dtype), count_(count), bytes_(count * dtype_size(dtype) + 1) {}
  void set(std::size_t i, double v);
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  std::size_t count() const { return count_; }
  std::size_t bytes() const { return count_ * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  std::size_t count_;
  std::vector<std::byte> bytes_;  // +1 so data() is never null for count 0
};

}  // namespace tributary::cli
