// Double binary tree (as in NCCL): the plain heap tree carries the first half of the
// vector, the mirrored one the second half. Every rank is interior in at most one of
// them (the mirrored tree's interior ranks are the plain tree's leaves), so the reduction
// and forwarding work is spread over all ranks instead of the plain tree's top half. The two
// pipelines advance in lock-step, one chunk of each per iteration.
#include <algorithm>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/tree.h"

namespace tributary::algorithms {

Status double_tree_all_reduce(const ReduceJob& job) {
  const int n = job.link.size();
  const int rank = job.link.rank();
  const std::size_t half = job.count / 2;
  TreePipeline first(job, heap_tree_node(rank, n, false), Range{0, half}, 0);
  TreePipeline second(job, heap_tree_node(rank, n, true), Range{half, job.count - half}, 1);
  const std::size_t iterations = std::max(first.iterations(), second.iterations());
  for (std::size_t i = 0; i < iterations; ++i) {
    TRIB_RETURN_IF_ERROR(first.step(i));
    TRIB_RETURN_IF_ERROR(second.step(i));
  }
  TRIB_RETURN_IF_ERROR(first.finish());
  return second.finish();
}

}  // namespace tributary::algorithms
