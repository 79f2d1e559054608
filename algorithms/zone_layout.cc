#include "algorithms/zone_layout.h"

#include <algorithm>
#include <map>

#include "core/check.h"
#include "core/hash.h"

namespace tributary::algorithms {

ZoneLayout::ZoneLayout(std::span<const int> zone_of_rank, int size) {
  TRIB_CHECK(size >= 1 && (zone_of_rank.empty() || static_cast<int>(zone_of_rank.size()) == size))
      << "zone layout of " << zone_of_rank.size() << " ranks for a group of " << size;
  zone_of_.resize(static_cast<std::size_t>(size));
  local_.resize(static_cast<std::size_t>(size));
  std::map<int, int> index;  // label -> zone index, in order of first appearance by rank
  for (int r = 0; r < size; ++r) {
    const int label = zone_of_rank.empty() ? 0 : zone_of_rank[static_cast<std::size_t>(r)];
    TRIB_CHECK(label >= 0) << "negative zone label " << label;
    auto [it, added] = index.emplace(label, static_cast<int>(members_.size()));
    if (added) members_.emplace_back();
    auto& zone = members_[static_cast<std::size_t>(it->second)];
    zone_of_[static_cast<std::size_t>(r)] = it->second;
    local_[static_cast<std::size_t>(r)] = static_cast<int>(zone.size());
    zone.push_back(r);
  }
}

int ZoneLayout::largest_zone() const {
  std::size_t m = 0;
  for (const auto& z : members_) m = std::max(m, z.size());
  return static_cast<int>(m);
}

int ZoneLayout::shards() const {
  std::size_t m = members_.front().size();
  for (const auto& z : members_) m = std::min(m, z.size());
  return static_cast<int>(m);
}

std::vector<int> ZoneLayout::cross_group(int shard) const {
  std::vector<int> group;
  group.reserve(members_.size());
  for (const auto& z : members_) group.push_back(z.at(static_cast<std::size_t>(shard)));
  return group;
}

std::uint32_t ZoneLayout::fingerprint() const {
  Fnv1a32 h;
  for (int z : zone_of_) h.add_le(static_cast<std::uint32_t>(z), 4);
  return h.value();
}

}  // namespace tributary::algorithms
