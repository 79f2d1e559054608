// The collectives as a value, for the CLI's workloads: names, bus-bandwidth factors
// (nccl-tests' conventions), buffer shapes.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace tributary::cli {

enum class CollectiveKind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAllToAll,
  kBarrier,
};

std::string_view to_string(CollectiveKind kind);
std::optional<CollectiveKind> parse_collective_kind(std::string_view name);
const std::vector<CollectiveKind>& all_collective_kinds();

// busbw = algbw * factor (all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all,
// gather, scatter (n-1)/n; broadcast and reduce 1).
double bus_bandwidth_factor(CollectiveKind kind, int world_size);

// Element counts of the send and receive buffers of one rank when the collective moves
// `total` elements in its largest buffer (nccl-tests' "size"); per_rank is the block size.
struct BufferShape {
  std::size_t send_count = 0;
  std::size_t recv_count = 0;
  std::size_t per_rank = 0;  // block length for the block-structured collectives
};
BufferShape buffer_shape(CollectiveKind kind, std::size_t total, int world_size);

}  // namespace tributary::cli
