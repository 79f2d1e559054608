// Hierarchical all-reduce by zone: the building block behind AllReduceAlgorithm::
// kHierarchical, exposed so that a codec can own the slow tier (compression/collectives).
//
// Three phases over sub-links of one epoch's link (sub_link.h), on the schedule of
// zone_layout.h:
//   1. reduce-scatter inside each zone (pipelined ring): shard i ends, reduced over the
//      zone in the ring's fixed order, on the zone's member with local index i;
//   2. cross-zone: the owners of shard i (one per zone) combine their zone sums: between
//      two zones by a CrossZoneStream (by default the owners swap their partials chunk by
//      chunk as phase 1 finishes them, and combine them in zone order), between more by
//      `cross` (by default an all_reduce among them); either must leave bitwise identical
//      bits on every owner;
//   3. all-gather inside each zone (pipelined ring) of the owners' bits.
// Every element is therefore reduced in one order fixed by the layout, and every rank
// holds the bits its shard's owner holds: identical everywhere. kAvg is summed and
// divided once by the group size at the owner, after phase 2.
//
// Unequal zones: there are as many shards as the smallest zone has members; members of a
// larger zone past that index own no shard (their zone's ring gives them an empty
// block), so inter-zone traffic is the same as with equal zones and the larger zone's
// reduce-scatter moves (k - 1) / shards of the vector per member instead of (k - 1) / k.
//
// Errors follow collectives.h: the link is aborted, recv is unspecified.
#pragma once

#include <cstddef>
#include <functional>

#include "algorithms/collectives.h"
#include "algorithms/link.h"
#include "algorithms/partition.h"

namespace tributary::algorithms {

// Phase 2 for one shard: `shard` holds this zone's reduction of `count` elements that
// start at element `offset` of the vector; on kOk it holds the reduction over every zone,
// bitwise identical on every member of `cross` (rank = zone index). `seq` is the seq the
// cross-zone messages must use (distinct from the caller's and every other space).
using CrossZoneReduce = std::function<Status(Link& cross, std::byte* shard, std::size_t offset,
                                             std::size_t count, std::uint64_t seq)>;

// The seq of a collective's cross-zone phase: the caller's seq with its top byte flipped
// by 0xA0, which maps every space of seq_space.h to one no other collective uses.
std::uint64_t cross_zone_seq(std::uint64_t seq);

// Phase 2 as a stream, for two zones (and only used there): the shard's chunks go out as
// the zone's reduce-scatter finishes them, so the slow link starts while the zone still
// reduces, and the zone all-gather starts with the first finished chunk.
//  - open(): once, before the zone phase, with the cross-zone sub-link (rank = zone
//    index), the seq to use, this rank's shard and its number of chunks (at least 1; an
//    empty shard is one empty chunk).
//  - start(c, range, data): chunk c (absolute element range; `data` points at its first
//    element) holds this zone's reduction; chunks start in order.
//  - finish(c, range, data): called in order after every start; must leave the reduction
//    over both zones in the chunk, bitwise identical on both owners.
//  - close(): after the last finish; an error fails the collective.
// After an error from any of them the link is aborted (in_flight.h) and the stream is
// destroyed without close().
class CrossZoneStream {
 public:
  virtual ~CrossZoneStream() = default;
  virtual void open(Link& cross, std::uint64_t seq, Range shard, std::size_t chunks) = 0;
  virtual Status start(std::size_t chunk, Range range, std::byte* data) = 0;
  virtual Status finish(std::size_t chunk, Range range, std::byte* data) = 0;
  virtual Status close() = 0;
};

// all_reduce() forced to kHierarchical, with `cross` as phase 2 (for op kAvg it must sum:
// the division comes after it). options.zones gives the layout (empty: one zone, which
// is a ring all-reduce).
Status hierarchical_all_reduce(Link& link, const void* send, void* recv, std::size_t count,
                               DType dtype, ReduceOp op, const CollectiveOptions& options,
                               const CrossZoneReduce& cross);
// The same with a streaming phase 2 between two zones (`stream` used only when the layout
// has exactly two; `cross` otherwise). `shards` > 0 caps the number of shards (1: the
// zone's reduce-scatter gives the whole vector to its first member, and one flow per
// direction crosses the zones; compression/collectives/zoned.cc says when that pays).
Status hierarchical_all_reduce(Link& link, const void* send, void* recv, std::size_t count,
                               DType dtype, ReduceOp op, const CollectiveOptions& options,
                               const CrossZoneReduce& cross, CrossZoneStream& stream,
                               int shards = 0);

}  // namespace tributary::algorithms
