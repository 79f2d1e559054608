// Collective algorithms over a Link. These are the building blocks the agent runtime runs
// inside one epoch; they know nothing of membership, retries or sockets.
//
// Common contract for every function here:
// - Every rank of the link calls the same collective with the same CollectiveOptions::seq,
//   count, dtype, op and root; a disagreement is detected where possible and reported as
//   kMismatch rather than producing a wrong answer.
// - Buffers are type-erased (pointer + count + DType). `send` and `recv` may be the same
//   pointer (in-place) wherever the shapes allow it (noted per function).
// - On kOk every rank holds the result; for all_reduce the results are bitwise identical
//   on every rank, whatever the algorithm (each element is reduced in one fixed order).
// - On any error the link must be abandoned (see link.h); `recv` holds unspecified bytes,
//   `send` is never modified unless it aliases `recv`.
// - ReduceOp::kAvg divides by link.size() at the end.
// - Every wait uses options.deadline; nothing blocks past it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "algorithms/link.h"
#include "core/dtype.h"

namespace tributary::algorithms {

enum class AllReduceAlgorithm : std::uint8_t {
  kAuto = 0,         // chosen by the alpha-beta cost model
  kRing,             // reduce-scatter + all-gather around a ring, chunked and pipelined
  kTree,             // pipelined binary tree: reduce to the root, broadcast back
  kDoubleTree,       // two complementary binary trees, half of the data on each
  kHalvingDoubling,  // Rabenseifner: recursive halving reduce-scatter + doubling all-gather
  kDirect,           // everyone sends everything to everyone: for tiny messages
  kHierarchical,     // by zone: reduce-scatter inside, all-reduce across, all-gather inside
};
inline constexpr int kNumAllReduceAlgorithms = 7;

std::string_view to_string(AllReduceAlgorithm a);
bool parse_all_reduce_algorithm(std::string_view name, AllReduceAlgorithm* out);

class CostModel;

struct CollectiveOptions {
  std::uint64_t seq = 0;  // tags this collective's messages; equal on every rank
  Deadline deadline = Deadline::after(std::chrono::seconds(30));
  // Pipeline granularity in bytes. Tests set it tiny to exercise many-chunk paths.
  std::size_t chunk_bytes = 256 * 1024;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  const CostModel* cost_model = nullptr;  // nullptr: the default model
  // Zone of each rank (any non-negative labels, equal on every rank; algorithms/
  // zone_layout.h), for kHierarchical and for kAuto's choice between flat and
  // hierarchical. Empty: every rank in one zone. The memory must outlive the call.
  std::span<const int> zones = {};
};

// recv[i] = op over ranks of send[i], count elements. In-place allowed.
Status all_reduce(Link& link, const void* send, void* recv, std::size_t count, DType dtype,
                  ReduceOp op, const CollectiveOptions& options);

// send holds size() blocks of recv_count elements; rank r receives block r reduced over
// ranks. In-place allowed when recv == send + rank * recv_count * dtype_size.
Status reduce_scatter(Link& link, const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op, const CollectiveOptions& options);

// recv holds size() blocks of send_count elements; block r is rank r's send.
// In-place allowed when send == recv + rank * send_count * dtype_size.
Status all_gather(Link& link, const void* send, void* recv, std::size_t send_count, DType dtype,
                  const CollectiveOptions& options);

// Root's send is copied into every rank's recv (pipelined). send is read on root only;
// in-place allowed (send == recv on root).
Status broadcast(Link& link, const void* send, void* recv, std::size_t count, DType dtype, int root,
                 const CollectiveOptions& options);

// Root's recv = op over ranks of send. recv is written on root only. In-place allowed.
Status reduce(Link& link, const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
              int root, const CollectiveOptions& options);

// Root's recv holds size() blocks of send_count elements, block r from rank r.
Status gather(Link& link, const void* send, void* recv, std::size_t send_count, DType dtype,
              int root, const CollectiveOptions& options);

// Root's send holds size() blocks of recv_count elements; rank r receives block r.
Status scatter(Link& link, const void* send, void* recv, std::size_t recv_count, DType dtype,
               int root, const CollectiveOptions& options);

// send and recv hold size() blocks of count_per_peer elements; block j of rank i's send
// becomes block i of rank j's recv (pairwise exchange). Not in-place.
Status all_to_all(Link& link, const void* send, void* recv, std::size_t count_per_peer, DType dtype,
                  const CollectiveOptions& options);

// All-to-all with a count per peer (MPI's alltoallv; torch's all_to_all_single with splits):
// rank i sends send_counts[j] elements from send + send_offsets[j] to rank j, which receives
// them at recv + recv_offsets[i] and must expect exactly that many (recv_counts[i]; a rank
// that expects another count fails with kMismatch, as its sender does). Counts and offsets
// are in elements, one per rank; send and recv must not overlap.
Status all_to_all_v(Link& link, const void* send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_offsets, void* recv,
                    std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_offsets, DType dtype,
                    const CollectiveOptions& options);

// Returns on a rank only after every rank has entered the barrier.
Status barrier(Link& link, const CollectiveOptions& options);

}  // namespace tributary::algorithms
