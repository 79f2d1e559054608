// A combining receive's payload (Link::recv_combine) fed in the pieces a stream delivers
// it in: whole elements are reduced into the destination at once, an element split
// between two pieces waits in a carry until its last byte arrives. Used by the links that
// combine (the shared-memory link straight out of the peer's ring, the TCP link out of a
// cache-sized bounce), so none of them deals with element boundaries itself.
//
// The result is bitwise that of reduce_to over the whole payload: reductions are
// element-wise, and every element is combined exactly once, in order.
#pragma once

#include <array>
#include <cstddef>

#include "algorithms/link.h"

namespace tributary::transport {

class CombineCursor {
 public:
  // A payload of dst's bytes starts, to be combined with c.operand into dst.
  void start(const algorithms::Combine& c, std::byte* dst);
  // The payload's next n bytes.
  void feed(const std::byte* src, std::size_t n);
  // Payload bytes fed so far (combined, or waiting in the carry).
  std::size_t fed() const { return done_ + carry_len_; }

 private:
  void combine(const std::byte* src, std::size_t bytes);  // whole elements at done_

  algorithms::Combine c_;
  std::byte* dst_ = nullptr;
  std::size_t es_ = 1;
  std::size_t done_ = 0;  // bytes of dst combined
  std::array<std::byte, 16> carry_{};
  std::size_t carry_len_ = 0;
};

}  // namespace tributary::transport
