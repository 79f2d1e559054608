#include "transport/combine_cursor.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/reduce.h"

namespace tributary::transport {

void CombineCursor::start(const algorithms::Combine& c, std::byte* dst) {
  c_ = c;
  dst_ = dst;
  es_ = dtype_size(c.dtype);
  TRIB_CHECK(es_ >= 1 && es_ <= carry_.size()) << "element of " << es_ << " bytes";
  done_ = 0;
  carry_len_ = 0;
}

void CombineCursor::combine(const std::byte* src, std::size_t bytes) {
  const std::size_t count = bytes / es_;
  if (count == 0) return;
  std::byte* out = dst_ + done_;
  const std::byte* operand = c_.operand + done_;
  if (c_.incoming_first) {
    reduce_to(out, src, operand, count, c_.dtype, c_.op);
  } else {
    reduce_to(out, operand, src, count, c_.dtype, c_.op);
  }
  done_ += count * es_;
}

void CombineCursor::feed(const std::byte* src, std::size_t n) {
  if (carry_len_ > 0) {
    const std::size_t take = std::min(es_ - carry_len_, n);
    std::memcpy(carry_.data() + carry_len_, src, take);
    carry_len_ += take;
    src += take;
    n -= take;
    if (carry_len_ < es_) return;
    carry_len_ = 0;
    combine(carry_.data(), es_);
  }
  const std::size_t whole = n - n % es_;
  combine(src, whole);
  carry_len_ = n - whole;
  if (carry_len_ > 0) std::memcpy(carry_.data(), src + whole, carry_len_);
}

}  // namespace tributary::transport
