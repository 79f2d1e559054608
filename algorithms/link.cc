#include "algorithms/link.h"

#include "algorithms/pollable_link.h"
#include "core/check.h"

namespace tributary::algorithms {

Link::Handle Link::recv_combine(int, Tag, std::span<std::byte>, const Combine&) {
  TRIB_CHECK(false) << "recv_combine() on a link that does not combine (check combines())";
  return 0;
}

Link::Handle PollableLink::send_stamped(int, Tag, std::span<const std::byte>, std::uint64_t) {
  TRIB_CHECK(false) << "send_stamped() on a link that carries no stamps (check carries_stamps())";
  return 0;
}

std::uint64_t PollableLink::stamp(Handle) const { return 0; }

}  // namespace tributary::algorithms
