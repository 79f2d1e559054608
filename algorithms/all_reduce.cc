// all_reduce(): argument checks, the trivial cases, the algorithm choice, dispatch.
#include <array>
#include <cstring>
#include <optional>
#include <string>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/collectives.h"
#include "algorithms/cost_model.h"
#include "algorithms/partition.h"
#include "algorithms/validate.h"
#include "algorithms/zone_layout.h"
#include "core/reduce.h"

namespace tributary::algorithms {
namespace {

constexpr std::array<std::string_view, kNumAllReduceAlgorithms> kNames = {
    "auto", "ring", "tree", "double_tree", "halving_doubling", "direct", "hierarchical"};

// all_reduce() and hierarchical_all_reduce(): checks, the choice, dispatch. `cross` and
// `stream` replace the cross-zone phase of kHierarchical when not null.
Status run_all_reduce(Link& link, const void* send, void* recv, std::size_t count, DType dtype,
                      ReduceOp op, const CollectiveOptions& options, const CrossZoneReduce* cross,
                      CrossZoneStream* stream, int shard_cap) {
  TRIB_RETURN_IF_ERROR(validate_shape(count, dtype, 1, options));
  TRIB_RETURN_IF_ERROR(validate_op(op));
  TRIB_RETURN_IF_ERROR(validate_buffer(send, count, "send"));
  TRIB_RETURN_IF_ERROR(validate_buffer(recv, count, "recv"));
  if (static_cast<std::uint8_t>(options.algorithm) >= kNumAllReduceAlgorithms) {
    return error(
        StatusCode::kInvalidArgument,
        "unknown all-reduce algorithm " + std::to_string(static_cast<int>(options.algorithm)));
  }
  const int n = link.size();
  if (!options.zones.empty() && static_cast<int>(options.zones.size()) != n) {
    return error(StatusCode::kInvalidArgument,
                 "all_reduce: " + std::to_string(options.zones.size()) + " zone labels for " +
                     std::to_string(n) + " ranks");
  }
  for (int z : options.zones) {
    if (z < 0) return error(StatusCode::kInvalidArgument, "all_reduce: negative zone label");
  }
  const std::size_t bytes = count * dtype_size(dtype);
  if (send != recv && overlaps(send, bytes, recv, bytes)) {
    return error(StatusCode::kInvalidArgument, "all_reduce: send and recv partially overlap");
  }
  // The layout only where the choice or the algorithm reads it: the Worker passes the
  // algorithm it chose, and building the layout (vectors per zone) on every call was about
  // 4% of a 4 KiB all-reduce over shared memory.
  std::optional<ZoneLayout> layout;
  if (options.algorithm == AllReduceAlgorithm::kAuto ||
      options.algorithm == AllReduceAlgorithm::kHierarchical) {
    layout.emplace(options.zones, n);
  }
  const CostModel& model = options.cost_model ? *options.cost_model : CostModel::default_model();
  const AllReduceAlgorithm algorithm = options.algorithm == AllReduceAlgorithm::kAuto
                                           ? model.choose(*layout, bytes)
                                           : options.algorithm;
  const Descriptor descriptor{.kind = Collective::kAllReduce,
                              .count = count,
                              .dtype = dtype,
                              .op = op,
                              .algorithm = static_cast<std::uint8_t>(algorithm)};
  // Ranks that disagree on the zones would build different groups: fold the layout in.
  const TagMaker tags(options.seq, algorithm == AllReduceAlgorithm::kHierarchical
                                       ? descriptor_check(descriptor) ^ layout->fingerprint()
                                       : descriptor_check(descriptor));
  if (count == 0) return ring_handshake(link, tags, options.deadline);
  if (n == 1) {
    if (send != recv) std::memcpy(recv, send, bytes);
    if (op == ReduceOp::kAvg) scale_by_count(recv, count, dtype, 1);
    return Status::ok();
  }

  const ReduceJob job{link,
                      static_cast<const std::byte*>(send),
                      static_cast<std::byte*>(recv),
                      count,
                      dtype,
                      op,
                      chunk_elements(options.chunk_bytes, dtype_size(dtype)),
                      options.deadline,
                      tags};
  switch (algorithm) {
    case AllReduceAlgorithm::kRing: return ring_all_reduce(job);
    case AllReduceAlgorithm::kTree: return tree_all_reduce(job);
    case AllReduceAlgorithm::kDoubleTree: return double_tree_all_reduce(job);
    case AllReduceAlgorithm::kHalvingDoubling: return halving_doubling_all_reduce(job);
    case AllReduceAlgorithm::kDirect: return direct_all_reduce(job);
    case AllReduceAlgorithm::kHierarchical:
      return hierarchical_job(job, *layout, options, cross, stream, shard_cap);
    case AllReduceAlgorithm::kAuto: break;
  }
  return error(StatusCode::kInternal, "the cost model chose kAuto");
}

}  // namespace

std::string_view to_string(AllReduceAlgorithm a) {
  const auto i = static_cast<std::size_t>(a);
  return i < kNames.size() ? kNames[i] : "unknown";
}

bool parse_all_reduce_algorithm(std::string_view name, AllReduceAlgorithm* out) {
  std::string canonical(name);
  for (char& ch : canonical) {
    if (ch == '-') ch = '_';
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  if (canonical == "rabenseifner") canonical = "halving_doubling";
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (canonical == kNames[i]) {
      *out = static_cast<AllReduceAlgorithm>(i);
      return true;
    }
  }
  return false;
}

Status all_reduce(Link& link, const void* send, void* recv, std::size_t count, DType dtype,
                  ReduceOp op, const CollectiveOptions& options) {
  return run_all_reduce(link, send, recv, count, dtype, op, options, nullptr, nullptr, 0);
}

Status hierarchical_all_reduce(Link& link, const void* send, void* recv, std::size_t count,
                               DType dtype, ReduceOp op, const CollectiveOptions& options,
                               const CrossZoneReduce& cross) {
  CollectiveOptions o = options;
  o.algorithm = AllReduceAlgorithm::kHierarchical;
  return run_all_reduce(link, send, recv, count, dtype, op, o, &cross, nullptr, 0);
}

Status hierarchical_all_reduce(Link& link, const void* send, void* recv, std::size_t count,
                               DType dtype, ReduceOp op, const CollectiveOptions& options,
                               const CrossZoneReduce& cross, CrossZoneStream& stream, int shards) {
  CollectiveOptions o = options;
  o.algorithm = AllReduceAlgorithm::kHierarchical;
  return run_all_reduce(link, send, recv, count, dtype, op, o, &cross, &stream, shards);
}

}  // namespace tributary::algorithms
