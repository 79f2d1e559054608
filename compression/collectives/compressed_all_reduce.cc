// compressed_all_reduce (compressed_all_reduce.h): checks the call, opens or joins the
// attempt, and dispatches to the plan's scheme.
#include "compression/collectives/compressed_all_reduce.h"

#include <optional>
#include <string>

#include "algorithms/partition.h"
#include "compression/collectives/exchange.h"
#include "compression/collectives/schemes.h"

namespace tributary::compression::collectives {
namespace {

Status invalid(const std::string& why) {
  return error(StatusCode::kInvalidArgument, "compressed_all_reduce: " + why);
}

Status check_arguments(const float* data, std::size_t count, ReduceOp op,
                       const CompressionContext& ctx,
                       const algorithms::CollectiveOptions& options) {
  if (ctx.plan == nullptr) return invalid("no plan");
  if (op != ReduceOp::kSum && op != ReduceOp::kAvg) return invalid("op must be sum or avg");
  if (count > 0 && data == nullptr) return invalid("null data");
  if (ctx.tensor_id >= (std::uint64_t{1} << 56)) return invalid("tensor id >= 2^56");
  if (options.chunk_bytes == 0) return invalid("chunk_bytes is 0");
  if (ctx.plan->stateful() && ctx.state == nullptr)
    return invalid("plan " + ctx.plan->spec + " needs a CompressionState");
  if (ctx.attempt != nullptr) {
    if (ctx.state == nullptr || !ctx.attempt->on(*ctx.state) ||
        ctx.attempt->tensor() != ctx.tensor_id || ctx.attempt->committed()) {
      return invalid("the attempt is not an open one on this state for tensor " +
                     std::to_string(ctx.tensor_id));
    }
  } else if (ctx.plan->stateful() && ctx.state->open_attempt() != nullptr) {
    return invalid("an attempt is open on this CompressionState: pass it in the context");
  }
  return Status::ok();
}

Status run_scheme(const SchemeCall& call) {
  switch (call.plan().kind) {
    case CompressionPlan::Kind::kDense: return dense_all_reduce(call);
    case CompressionPlan::Kind::kQuantized: return quantized_all_reduce(call);
    case CompressionPlan::Kind::kSparse: return sparse_all_reduce(call);
    case CompressionPlan::Kind::kPowerSgd: return powersgd_all_reduce(call);
  }
  return invalid("unknown plan kind");
}

}  // namespace

Status compressed_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                             const CompressionContext& ctx,
                             const algorithms::CollectiveOptions& options) {
  TRIB_RETURN_IF_ERROR(check_arguments(data, count, op, ctx, options));
  if (runs_zoned(ctx, options, count, link.size())) {
    if (ctx.stats) *ctx.stats = CompressionStats{};
    return zoned_all_reduce(link, data, count, op, ctx, options);
  }
  const CompressionPlan& plan = *ctx.plan;
  if (ctx.stats) {
    *ctx.stats = CompressionStats{};
    ctx.stats->raw_bytes = count * sizeof(float);
  }
  CompressionState::Scratch local_scratch;
  CompressionState::Scratch& scratch = ctx.state ? ctx.state->scratch() : local_scratch;
  scratch.bytes_used = 0;

  // The caller's attempt, or one of our own that lives for this call.
  std::optional<CompressionAttempt> own;
  CompressionAttempt* attempt = ctx.attempt;
  if (attempt == nullptr && plan.stateful()) attempt = &own.emplace(*ctx.state, ctx.tensor_id);
  if (attempt != nullptr) attempt->begin_run(count);
  if (plan.kind == CompressionPlan::Kind::kQuantized && plan.error_feedback) {
    // Settle slice ownership (fold or drop a stage-2 residual left from another view): a
    // view-change action, so after begin_run()'s rollback and never rolled back itself.
    const algorithms::Range mine = algorithms::balanced_part(count, link.size(), link.rank());
    (void)ctx.state->owner_residual(ctx.tensor_id, count, link.size(), link.rank(), mine.begin,
                                    mine.count);
  }
  const std::uint32_t check = descriptor_check(plan, count, op, ctx.step, link.size());
  const SchemeCall call{link, data, count, op, ctx, options, check, scratch, attempt};
  const Status s = run_scheme(call);
  if (!s.is_ok() && attempt != nullptr) attempt->rollback();
  if (s.is_ok() && own) own->commit();
  return s;
}

}  // namespace tributary::compression::collectives
