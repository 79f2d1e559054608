#include "algorithms/sub_link.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace tributary::algorithms {

SubLink::SubLink(Link& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const int m = members_[i];
    TRIB_CHECK(m >= 0 && m < parent.size()) << "sub-link member " << m << " outside the group";
    TRIB_CHECK(std::count(members_.begin(), members_.end(), m) == 1)
        << "sub-link member " << m << " listed twice";
    if (m == parent.rank()) rank_ = static_cast<int>(i);
  }
  TRIB_CHECK(rank_ >= 0) << "sub-link without its own rank " << parent.rank();
}

int SubLink::parent_rank(int peer) const {
  TRIB_CHECK(peer >= 0 && peer < size() && peer != rank_) << "sub-link peer " << peer;
  return members_[static_cast<std::size_t>(peer)];
}

Link::Handle SubLink::send(int peer, Tag tag, std::span<const std::byte> data) {
  return parent_.send(parent_rank(peer), tag, data);
}

Link::Handle SubLink::recv(int peer, Tag tag, std::span<std::byte> data) {
  return parent_.recv(parent_rank(peer), tag, data);
}

Link::Handle SubLink::recv_combine(int peer, Tag tag, std::span<std::byte> data,
                                   const Combine& c) {
  return parent_.recv_combine(parent_rank(peer), tag, data, c);
}

}  // namespace tributary::algorithms
