// kDense: float32 as a plain all_reduce, and the dense rounds of the other schemes.
#include <cstring>

#include "compression/collectives/schemes.h"

namespace tributary::compression::collectives {
namespace {

std::uint64_t ring_bytes(std::size_t count, int n) {
  return n <= 1 ? 0
                : 2 * static_cast<std::uint64_t>(n - 1) * count * sizeof(float) /
                      static_cast<std::uint64_t>(n);
}

}  // namespace

Status float32_all_reduce(const SchemeCall& call, algorithms::SeqSpace space, const float* in,
                          float* out, std::size_t count, ReduceOp op) {
  algorithms::CollectiveOptions o = call.options;
  o.seq = algorithms::seq_in(space, call.options.seq);
  TRIB_RETURN_IF_ERROR(algorithms::all_reduce(call.link, in, out, count, DType::kFloat32, op, o));
  if (call.ctx.stats) call.ctx.stats->wire_bytes_sent += ring_bytes(count, call.link.size());
  return Status::ok();
}

Status dense_all_reduce(const SchemeCall& call) {
  // Out of place into scratch, so that `data` is untouched on error.
  std::vector<float>& out = call.scratch.result;
  out.resize(call.count);
  TRIB_RETURN_IF_ERROR(float32_all_reduce(call, algorithms::SeqSpace::kCompressedPlain, call.data,
                                          out.data(), call.count, call.op));
  if (call.count) std::memcpy(call.data, out.data(), call.count * sizeof(float));
  return Status::ok();
}

}  // namespace tributary::compression::collectives
