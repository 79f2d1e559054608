// The all-reduce algorithms behind all_reduce()'s dispatch, and what they share.
//
// Every function here assumes what all_reduce() has already established: size() >= 2,
// count >= 1, valid dtype and op, and send == recv or the two do not overlap. Each one
// reduces every element exactly once, at one owner, in an order fixed by (rank, count,
// algorithm) alone, then distributes the owner's bits, so all ranks end bitwise equal.
// kAvg is reduced as a sum and scaled once by the owner, before distribution.
#pragma once

#include <cstddef>

#include "algorithms/hierarchical.h"
#include "algorithms/link.h"
#include "algorithms/tags.h"
#include "core/dtype.h"

namespace tributary::algorithms {

struct ReduceJob {
  Link& link;
  const std::byte* send;
  std::byte* recv;
  std::size_t count;
  DType dtype;
  ReduceOp op;
  std::size_t chunk_elements;  // pipeline granularity, >= 1
  Deadline deadline;
  TagMaker tags;

  std::size_t element_size() const { return dtype_size(dtype); }
};

// Recv slots each receive-and-reduce loop keeps posted ahead of the chunk it reduces.
inline constexpr std::size_t kRecvDepth = 3;

Status ring_all_reduce(const ReduceJob& job);
Status tree_all_reduce(const ReduceJob& job);
Status double_tree_all_reduce(const ReduceJob& job);
Status halving_doubling_all_reduce(const ReduceJob& job);
Status direct_all_reduce(const ReduceJob& job);

class ZoneLayout;
// kHierarchical on `layout` (hierarchical.h), with `cross` as the cross-zone phase; null:
// between two zones the owners swap their partials chunk by chunk as the zone's
// reduce-scatter finishes them, between more an all_reduce among the owners
// (default_cross_zone_reduce).
// `stream`, when not null, replaces both between two zones (hierarchical.h).
// `shard_cap` > 0 caps the shard count (hierarchical.h).
Status hierarchical_job(const ReduceJob& job, const ZoneLayout& layout,
                        const CollectiveOptions& options, const CrossZoneReduce* cross,
                        CrossZoneStream* stream, int shard_cap);
// The cross-zone phase of a plain all_reduce: all_reduce among the shard's owners with
// the algorithm options.cost_model's cross-zone model picks. Holds `options` by reference.
CrossZoneReduce default_cross_zone_reduce(DType dtype, ReduceOp op,
                                          const CollectiveOptions& options);

// One empty message from each rank to its ring successor, carrying the descriptor check.
// Used when there are no elements: a rank called with count 0 still meets its
// neighbours, so one that disagrees gets kMismatch (or its deadline) instead of kOk.
Status ring_handshake(Link& link, const TagMaker& tags, Deadline deadline);

}  // namespace tributary::algorithms
