// Compressed all-reduce over a Link: the collective that puts the codecs of
// compression/codec.h on the wire, in memory (MemoryFabric) for tests and over TCP in the
// product.
//
// One entry point, compressed_all_reduce(), runs one of four schemes chosen by the plan
// (compression_plan.h), each in a file of its own:
//
//  - kQuantized (float16, bfloat16, qint8, qint4, sign; quantized.cc): a compressed
//    reduce-scatter by pairwise exchange (each rank encodes each of the n slices of its
//    tensor once and sends slice j to its owner, rank j), the owner decodes and
//    accumulates the n payloads in rank order 0..n-1 in float32, re-encodes its reduced
//    slice once, and an all-gather sends those bytes to everyone. Every rank, the owner
//    included, decodes every slice from the same bytes. Exactly two quantizations
//    whatever n is (n = 1 included), with error feedback at both: stage 1 per tensor on
//    every rank, stage 2 on the owner per (tensor, slice) under the current view's slice
//    ownership.
//  - kSparse (top-k; sparse.cc): every rank encodes its tensor once (with error feedback
//    and, if configured, DGC momentum correction) and all-gathers the payloads; every
//    rank sums the n payloads in rank order. When the union is expected to be dense
//    (density(step) * n > dense_threshold) the same top-k payloads are densified locally
//    and summed by a plain float32 all_reduce instead (docs/compression.md has the volume
//    formulas).
//  - kPowerSgd (powersgd_all_reduce.cc): PowerSgd's steps (powersgd.h) driven by two dense
//    float32 all-reduces: [P | uncompressed elements], then Q.
//  - kDense (float32; dense.cc): a plain all_reduce, so "compression off" goes through
//    the same call.
// The messages of the first two go through exchange.h.
//
// Guarantees:
//  - On kOk `data` holds the result, bitwise identical on every rank (every element is
//    produced by decoding the same bytes, or by an all_reduce that promises the same).
//  - State is all-or-nothing through a CompressionAttempt (compression_attempt.h): the
//    caller's (ctx.attempt), which it commits once the cluster agreed on the result, or,
//    without one, the call's own, committed on kOk. On any error the CompressionState is
//    exactly as before the call, so re-running the collective in a new epoch with the same
//    input does not count any gradient twice. `data` is unspecified after an error, as
//    for all_reduce in collectives.h: the caller re-runs from its own copy of the input
//    (agent/worker.cc keeps one). The link is aborted on error, as collectives.h requires.
//  - Tags: this collective uses the caller's seq for its own messages and, for the dense
//    all_reduce calls it makes (PowerSGD, the dense fallback, kDense), the compression
//    spaces of algorithms/seq_space.h. Callers keep seqs below 2^56. Tag::check hashes
//    the plan, count, op, step and group size, so ranks that disagree fail with kMismatch.
//  - Bad input: a peer's size word is bounded by the codec's max_encoded_bytes before any
//    buffer is sized from it; payloads are validated by the decoders (kBadFrame).
//  - Not thread-safe per CompressionState; buffers are the caller's; nothing is retained.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "algorithms/collectives.h"
#include "algorithms/link.h"
#include "algorithms/zone_layout.h"
#include "compression/collectives/compression_attempt.h"
#include "compression/collectives/compression_plan.h"
#include "compression/collectives/compression_state.h"
#include "compression/powersgd.h"
#include "core/status.h"

namespace tributary::compression::collectives {

// Filled by compressed_all_reduce when the context points at one.
struct CompressionStats {
  std::uint64_t raw_bytes = 0;        // count * 4: the goodput basis
  std::uint64_t wire_bytes_sent = 0;  // this rank's bytes handed to the link: payloads and
                                      // 8-byte size words; a dense all_reduce inside is
                                      // counted as a ring would send, 2(n-1)/n * bytes
  std::uint64_t messages_sent = 0;    // own messages (dense all_reduce calls not counted)
  int quantizations = 0;              // lossy encodings applied along any element's path
  bool dense_fallback = false;        // kSparse ran as a dense all_reduce this call
  // Two tiers (CompressionContext::wan): this rank's bytes handed to the cross-zone links
  // (0 for a member that owns no shard); wire_bytes_sent stays 0, the zone tier is float32.
  std::uint64_t cross_zone_wire_bytes = 0;
};

struct CompressionContext {
  const CompressionPlan* plan = nullptr;     // required
  CompressionState* state = nullptr;         // required unless the plan keeps no state
  CompressionAttempt* attempt = nullptr;     // optional: on `state`, for `tensor_id`
  std::uint64_t tensor_id = 0;               // < 2^56; names residuals and RNG streams
  std::uint64_t step = 0;                    // RNG key and top-k warm-up; equal on every rank
  std::uint64_t seed = 0;                    // cluster-wide RNG seed
  std::span<const MatrixShape> shapes = {};  // PowerSGD: the matrices of the flat tensor
  CompressionStats* stats = nullptr;         // optional
  // The slow tier. When set and the call runs hierarchical by zone (options.zones spans
  // several zones, and options.algorithm is kHierarchical, or kAuto and the cost model
  // picks it), the call is two tiers: float32 inside each zone (`plan` must be float32)
  // and, among the owners of each shard across zones, compressed_all_reduce with this
  // context (its own plan, state, attempt: error feedback kept per tier) on the shard.
  // Otherwise ignored: the call is flat with `plan`.
  const CompressionContext* wan = nullptr;
};

// How many shards a two-tier call (CompressionContext::wan) cuts the vector into on
// `layout`: one per zone for a quantizing codec across (the zone's first member carries
// it: one flow per direction between zones, which the shaped-link benchmark measured at
// 1.23 x the floor against 1.64 with three), the smallest zone's size otherwise (the
// hierarchical all-reduce's default). The shard owners keep the slow tier's residuals.
int two_tier_shards(const CompressionPlan& wan, const algorithms::ZoneLayout& layout);

// data[0..count) := op over ranks of data (kSum or kAvg; kAvg divides by n at the end).
Status compressed_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                             const CompressionContext& context,
                             const algorithms::CollectiveOptions& options);

}  // namespace tributary::compression::collectives
