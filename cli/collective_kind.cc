#include "cli/collective_kind.h"

namespace tributary::cli {

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "invalid";
}

const std::vector<CollectiveKind>& all_collective_kinds() {
  static const std::vector<CollectiveKind> kinds = {
      CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
      CollectiveKind::kBroadcast, CollectiveKind::kReduce,        CollectiveKind::kGather,
      CollectiveKind::kScatter,   CollectiveKind::kAllToAll,      CollectiveKind::kBarrier};
  return kinds;
}

std::optional<CollectiveKind> parse_collective_kind(std::string_view name) {
  for (CollectiveKind k : all_collective_kinds()) {
    if (to_string(k) == name) return k;
  }
  if (name == "allreduce") return CollectiveKind::kAllReduce;
  if (name == "reducescatter") return CollectiveKind::kReduceScatter;
  if (name == "allgather") return CollectiveKind::kAllGather;
  if (name == "alltoall") return CollectiveKind::kAllToAll;
  return std::nullopt;
}

double bus_bandwidth_factor(CollectiveKind kind, int n) {
  const double ring = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2.0 * ring;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return 1.0;
    case CollectiveKind::kBarrier: return 0.0;
    default: return ring;
  }
}

BufferShape buffer_shape(CollectiveKind kind, std::size_t total, int n) {
  const auto un = static_cast<std::size_t>(n);
  const std::size_t block = total / un;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return {total, total, total};
    case CollectiveKind::kReduceScatter: return {block * un, block, block};
    case CollectiveKind::kAllGather: return {block, block * un, block};
    case CollectiveKind::kGather: return {block, block * un, block};
    case CollectiveKind::kScatter: return {block * un, block, block};
    case CollectiveKind::kAllToAll: return {block * un, block * un, block};
    case CollectiveKind::kBarrier: return {0, 0, 0};
  }
  return {};
}

}  // namespace tributary::cli
