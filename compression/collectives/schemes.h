// Inside compressed_all_reduce (compressed_all_reduce.h): the four schemes it dispatches
// to, one file each, and the little they share. Not part of the target's interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/collectives.h"
#include "algorithms/link.h"
#include "algorithms/seq_space.h"
#include "compression/codec.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "compression/error_feedback.h"

namespace tributary::compression::collectives {

// One validated call, as every scheme sees it.
struct SchemeCall {
  algorithms::Link& link;
  float* data;
  std::size_t count;
  ReduceOp op;
  const CompressionContext& ctx;
  const algorithms::CollectiveOptions& options;
  std::uint32_t check;                 // Tag::check of the call's own messages
  CompressionState::Scratch& scratch;  // the state's, or the call's own
  CompressionAttempt* attempt;         // null when the plan keeps no state

  const CompressionPlan& plan() const { return *ctx.plan; }
};

Status dense_all_reduce(const SchemeCall& call);
Status quantized_all_reduce(const SchemeCall& call);
Status sparse_all_reduce(const SchemeCall& call);
Status powersgd_all_reduce(const SchemeCall& call);

// zoned.cc: whether the call runs as two tiers (ctx.wan set, several zones, and
// kHierarchical forced or chosen by the cost model), and that run.
bool runs_zoned(const CompressionContext& ctx, const algorithms::CollectiveOptions& options,
                std::size_t count, int n);
Status zoned_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                        const CompressionContext& ctx,
                        const algorithms::CollectiveOptions& options);

// A float32 all_reduce of count elements in `space` of the call's seq (dense.cc), counted
// in the stats as a ring would send it. `in` may equal `out`.
Status float32_all_reduce(const SchemeCall& call, algorithms::SeqSpace space, const float* in,
                          float* out, std::size_t count, ReduceOp op);

// A stage's encode of the piece starting at `element_offset`: the counter RNG is keyed by
// (seed, tensor and stage, step, rank), the same on a re-run.
inline EncodeOptions encode_options(const CompressionContext& ctx, std::uint32_t stage, int rank,
                                    std::size_t element_offset) {
  EncodeOptions eo;
  eo.seed = ctx.seed;
  eo.stream = ErrorFeedback::key(ctx.tensor_id, stage);
  eo.step = ctx.step;
  eo.rank = static_cast<std::uint32_t>(rank);
  eo.element_offset = element_offset;
  return eo;
}

// kAvg: divide by n at the end (the same operation on the same bits on every rank).
inline void finish_op(float* out, std::size_t count, ReduceOp op, int n) {
  if (op != ReduceOp::kAvg || n == 1) return;
  const float fn = static_cast<float>(n);
  for (std::size_t i = 0; i < count; ++i) out[i] = out[i] / fn;
}

}  // namespace tributary::compression::collectives
