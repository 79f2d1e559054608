#include "algorithms/link.h"

#include "core/check.h"

namespace tributary::algorithms {

Link::Handle Link::recv_combine(int, Tag, std::span<std::byte>, const Combine&) {
  TRIB_CHECK(false) << "recv_combine() on a link that does not combine (check combines())";
  return 0;
}

}  // namespace tributary::algorithms
