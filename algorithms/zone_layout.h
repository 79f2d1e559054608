// Which ranks of a group share a zone (datacenter, site), and the schedule that
// hierarchical collectives derive from it.
//
// Built from one zone index per rank (equal on every rank: the agent derives it from the
// view's zone labels). Zones need not be contiguous in rank order, nor of equal size.
// Every query is a pure function of that vector, so every rank derives the same groups
// and the same shard boundaries without talking.
//
// Shards: a hierarchical all-reduce cuts the vector into `shards()` = the size of the
// smallest zone near-equal parts. In every zone, the member with local index i < shards()
// owns shard i; members past the smallest zone's size own none (they take part in their
// zone's reduce-scatter and all-gather only). The owners of shard i, one per zone, form
// cross-zone group i. So every byte that crosses zones does so exactly once per
// direction, whatever the zone sizes: unequal zones cost only intra-zone balance.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tributary::algorithms {

class ZoneLayout {
 public:
  // `zone_of_rank[r]`: any non-negative label per rank; empty means one zone of `size`.
  ZoneLayout(std::span<const int> zone_of_rank, int size);

  int size() const { return static_cast<int>(zone_of_.size()); }
  int zones() const { return static_cast<int>(members_.size()); }
  // Zone index (0..zones()-1, numbered by the lowest rank in each) of `rank`.
  int zone_of(int rank) const { return zone_of_[static_cast<std::size_t>(rank)]; }
  // Ranks of zone `z`, ascending.
  const std::vector<int>& members(int z) const { return members_[static_cast<std::size_t>(z)]; }
  // Position of `rank` inside its zone.
  int local_index(int rank) const { return local_[static_cast<std::size_t>(rank)]; }
  int largest_zone() const;
  // Number of shards, the smallest zone's size.
  int shards() const;
  // Ranks of cross-zone group `shard` (its owner in each zone, by zone index).
  std::vector<int> cross_group(int shard) const;
  // FNV-1a over the normalised layout: ranks that disagree compute different tags.
  std::uint32_t fingerprint() const;

 private:
  std::vector<int> zone_of_;
  std::vector<int> local_;
  std::vector<std::vector<int>> members_;
};

}  // namespace tributary::algorithms
