// kPowerSgd: PowerSgd's steps (compression/powersgd.h) driven by two float32 all-reduces.
#include <cstring>
#include <vector>

#include "compression/collectives/schemes.h"

namespace tributary::compression::collectives {

Status powersgd_all_reduce(const SchemeCall& call) {
  PowerSgdParams params = call.plan().powersgd;
  params.seed = call.ctx.seed;
  TRIB_ASSIGN_OR_RETURN(PowerSgd * made, call.attempt->powersgd(call.ctx.shapes, params));
  PowerSgd& ps = *made;
  const int n = call.link.size();

  // [P | uncompressed elements] in one all-reduce, then Q: two rounds per step. Averages
  // (not sums) so that the residual M - P Q^T is measured against the mean, as in
  // Vogels et al.; kSum scales the result by n afterwards.
  std::vector<float> first(ps.p_count() + ps.dense_count());
  std::vector<float> q(ps.q_count());
  const std::span<float> p(first.data(), ps.p_count());
  const std::span<float> dense(first.data() + ps.p_count(), ps.dense_count());
  ps.compute_p(call.data, p);
  ps.pack_uncompressed(call.data, dense);
  TRIB_RETURN_IF_ERROR(float32_all_reduce(call, algorithms::SeqSpace::kCompressedDense,
                                          first.data(), first.data(), first.size(),
                                          ReduceOp::kAvg));
  ps.orthogonalize(p);
  ps.compute_q(p, q);
  TRIB_RETURN_IF_ERROR(float32_all_reduce(call, algorithms::SeqSpace::kCompressedStage2, q.data(),
                                          q.data(), q.size(), ReduceOp::kAvg));
  std::vector<float> out(call.count);
  ps.reconstruct(p, q, dense, out.data());
  if (call.op == ReduceOp::kSum && n > 1) {
    const float fn = static_cast<float>(n);
    for (float& x : out) x = x * fn;
  }
  if (call.count) std::memcpy(call.data, out.data(), call.count * sizeof(float));
  if (call.ctx.stats) call.ctx.stats->quantizations = 1;
  return Status::ok();
}

}  // namespace tributary::compression::collectives
