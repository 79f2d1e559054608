// Compressed all-reduce over a Link: the collectives that put the codecs of codec.h on the
// wire, in memory (MemoryFabric) for tests and over TCP in the product.
//
// One entry point, compressed_all_reduce(), runs one of four schemes chosen by the plan:
//
//  - kQuantized (float16, bfloat16, qint8, qint4, sign): a compressed reduce-scatter by
//    pairwise exchange (each rank encodes each of the n slices of its tensor once and sends
//    slice j to its owner, rank j), the owner decodes and accumulates the n payloads in
//    rank order 0..n-1 in float32, re-encodes its reduced slice once, and an all-gather
//    sends those bytes to everyone. Every rank, the owner included, decodes every slice
//    from the same bytes. Exactly two quantizations whatever n is (n = 1 included), with
//    error feedback at both: stage 1 per tensor on every rank, stage 2 on the owner per
//    (tensor, slice) under the current view's slice ownership.
//  - kSparse (top-k): every rank encodes its tensor once (with error feedback and, if
//    configured, DGC momentum correction) and all-gathers the payloads; every rank sums
//    the n payloads in rank order. When the union is expected to be dense
//    (density(step) * n > dense_threshold) the same top-k payloads are densified locally
//    and summed by a plain float32 all_reduce instead (docs/compression.md has the volume
//    formulas).
//  - kPowerSgd: PowerSgd's steps (powersgd.h) driven by two dense float32 all-reduces:
//    [P | uncompressed elements], then Q.
//  - kDense (float32): a plain all_reduce, so "compression off" goes through the same call.
//
// Guarantees:
//  - On kOk `data` holds the result, bitwise identical on every rank (every element is
//    produced by decoding the same bytes, or by an all_reduce that promises the same).
//  - On any error the CompressionState is exactly as before the call (each residual
//    range is saved just before it is encoded and restored on error), so re-running the
//    collective in a new epoch with the same input does not count any gradient twice.
//    `data` is unspecified after an error, as for all_reduce in collectives.h: the caller
//    re-runs from its own copy of the input (agent/worker.cc keeps one). The link is
//    aborted on error, as collectives.h requires.
//  - Tags: this collective uses the caller's seq for its own messages and, for the dense
//    all_reduce calls it makes (PowerSGD, the dense fallback, kDense), seq with its top
//    byte replaced by 0xC1..0xC3. Callers keep seqs below 2^56. Tag::check hashes the
//    plan, count, op, step and group size, so ranks that disagree fail with kMismatch.
//  - Bad input: a peer's size word is bounded by the codec's max_encoded_bytes before any
//    buffer is sized from it; payloads are validated by the decoders (kBadFrame).
//  - Not thread-safe per CompressionState; buffers are the caller's; nothing is retained.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/link.h"
#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "compression/error_feedback.h"
#include "compression/powersgd.h"
#include "core/status.h"

namespace tributary::compression {

// What compressed_all_reduce does, parsed once at the edge from a spec string:
//   "float32"                                   plain all_reduce
//   "float16", "bfloat16"                       casts (error feedback off unless ef=1)
//   "qint8:bucket=512", "qint4:bucket=256,zstd" quantized (error feedback on unless ef=0)
//   "sign:bucket=512"                           quantized, scaled sign (ef on unless ef=0)
//   "topk:density=0.01,warmup=50,dense_at=1"    sparse (ef on unless ef=0)
//   "powersgd:rank=2[,ef=0][,warm=0]"           PowerSGD
// Keys added to codec_registry.h's: ef=0|1, dense_at=X (top-k: switch to dense when
// density(step) * n > X; default 1, i.e. when the union could cover the tensor).
struct CompressionPlan {
  enum class Kind : std::uint8_t { kDense, kQuantized, kSparse, kPowerSgd };

  Kind kind = Kind::kDense;
  CodecConfig codec_config;            // kQuantized, kSparse
  std::shared_ptr<const Codec> codec;  // kQuantized, kSparse
  PowerSgdParams powersgd;             // kPowerSgd (seed comes from the context)
  bool error_feedback = false;         // kQuantized, kSparse (PowerSGD: powersgd.error_feedback)
  double dense_threshold = 1.0;        // kSparse
  std::string spec;                    // canonical, equal on every rank for equal plans

  static Result<CompressionPlan> parse(std::string_view spec);
};

// What happens to an owner's stage-2 residual when slice ownership changes (the group
// size or this rank's position changed): kFold adds it into this worker's own stage-1
// residual at the same elements, so that mass is sent again, once, by one rank in the
// next step (nothing lost, nothing doubled); kDrop discards it.
struct CompressionContext;

enum class OwnerResidualPolicy : std::uint8_t { kFold, kDrop };

// Per-worker state of the compressed collectives: error-feedback residuals of both stages
// and the PowerSGD objects, keyed by tensor id (< 2^56). One per worker, alive across
// views. Not thread-safe.
//
// Membership policy (docs/compression.md, "Residuals across membership changes"):
//  - view change: stage-1 residuals and PowerSGD residuals are kept (this worker's unsent
//    gradient); stage-2 residuals whose (group size, slice) no longer match are folded or
//    dropped per OwnerResidualPolicy. compressed_all_reduce applies the same rule lazily
//    if on_view_change() was not called.
//  - rejoin after this worker's own eviction: on_rejoin() drops everything.
//  - an aborted collective: restored by compressed_all_reduce itself; snapshot()/restore()
//    let the runtime also undo a collective that returned kOk in a step that was not
//    committed.
class CompressionState {
 public:
  explicit CompressionState(OwnerResidualPolicy policy = OwnerResidualPolicy::kFold)
      : policy_(policy) {}

  static constexpr std::uint32_t kStageWorker = 1;  // ErrorFeedback stage byte, stage 1
  static constexpr std::uint32_t kStageOwner = 2;   // RNG stream stage byte, stage 2

  // Stage-1 residuals (and top-k momentum) under ErrorFeedback::key(tensor, kStageWorker).
  ErrorFeedback& worker() { return worker_; }
  const ErrorFeedback& worker() const { return worker_; }

  // The owner residual of `tensor` for slice `slice` of `group_size`, [offset, offset +
  // count) of a tensor of tensor_count elements. An entry recorded for another (group
  // size, slice, offset, count, tensor_count) is first folded or dropped per the policy.
  std::span<float> owner_residual(std::uint64_t tensor, std::size_t tensor_count, int group_size,
                                  int slice, std::size_t offset, std::size_t count);
  bool has_owner_residual(std::uint64_t tensor) const { return owner_.count(tensor) != 0; }
  double owner_residual_norm2(std::uint64_t tensor) const;

  // The PowerSgd of `tensor` for this layout; created on first use or when the layout or
  // parameters change (which drops its residual and warm start).
  Result<PowerSgd*> powersgd(std::uint64_t tensor, std::size_t total_count,
                             std::span<const MatrixShape> shapes, const PowerSgdParams& params);

  // The group changed: this worker is now `new_rank` of `new_size`.
  void on_view_change(int new_size, int new_rank);
  // This worker was evicted and rejoins: all state goes.
  void on_rejoin();

  struct Snapshot {
    std::uint64_t tensor = 0;
    ErrorFeedback::Snapshot worker;
    bool owner_present = false;
    struct Owner {
      int group_size = 0;
      int slice = 0;
      std::size_t offset = 0;
      std::size_t tensor_count = 0;
      std::vector<float> residual;
    } owner;
    struct PowerSgdState {
      std::size_t total_count = 0;
      std::vector<MatrixShape> shapes;
      PowerSgdParams params;
      PowerSgd::Snapshot state;
    };
    std::optional<PowerSgdState> powersgd;
  };
  Snapshot snapshot(std::uint64_t tensor) const;
  void restore(const Snapshot& snapshot);

  OwnerResidualPolicy policy() const { return policy_; }

  // Buffers the collectives reuse from call to call (not state: never snapshotted), so a
  // training loop does not page-fault tens of MiB of fresh scratch in every step. Holds
  // about three times the largest tensor's compressed size plus one float copy of it.
  struct Scratch {
    std::vector<float> result;
    std::vector<float> reduced;
    std::deque<std::vector<std::byte>> bytes;  // deque: stable addresses while growing
    std::size_t bytes_used = 0;
    std::vector<std::byte>& next_bytes() {
      if (bytes_used == bytes.size()) bytes.emplace_back();
      return bytes[bytes_used++];
    }
  };
  Scratch& scratch() { return scratch_; }

  // compressed_all_reduce's own bookkeeping (public only so that its helpers can reach
  // it; nothing else should call these). What it restores on error. The residuals are saved piece
  // by piece, just before each piece is encoded (each piece is encoded at most once per call), so
  // the copy overlaps the transfer instead of preceding it; saved ranges live in buffers
  // kept from call to call. A worker residual whose count differs from the call's is
  // dropped by the call and not restored (error_feedback.h: a count change voids it).
  void begin_attempt(std::uint64_t tensor, std::size_t count, bool powersgd);
  void save_worker(std::size_t offset, std::size_t n, bool momentum);
  void save_owner(std::size_t offset, std::size_t n);
  void rollback();

 private:
  using Owner = Snapshot::Owner;
  struct Attempt {
    std::uint64_t tensor = 0;
    std::size_t count = 0;
    bool worker_present = false;
    bool owner_present = false;
    std::vector<float> residual;  // count floats; valid on the saved ranges
    std::vector<float> momentum;  // likewise, when momentum was saved
    std::vector<float> owner;     // the owner residual; valid on the saved ranges
    std::vector<std::pair<std::size_t, std::size_t>> worker_saved, owner_saved, momentum_saved;
    std::optional<Snapshot::PowerSgdState> powersgd;
  };
  struct PowerSgdEntry {
    std::size_t total_count = 0;
    std::vector<MatrixShape> shapes;
    PowerSgdParams params;
    std::optional<PowerSgd> psgd;
  };
  void release_owner(std::uint64_t tensor);  // fold or drop, then erase

  OwnerResidualPolicy policy_;
  ErrorFeedback worker_;
  std::map<std::uint64_t, Owner> owner_;
  std::map<std::uint64_t, PowerSgdEntry> powersgd_;
  Attempt attempt_;
  Scratch scratch_;
};

// Filled by compressed_all_reduce when the context points at one.
struct CompressionStats {
  std::uint64_t raw_bytes = 0;        // count * 4: the goodput basis
  std::uint64_t wire_bytes_sent = 0;  // this rank's bytes handed to the link: payloads and
                                      // 8-byte size words; a dense all_reduce inside is
                                      // counted as a ring would send, 2(n-1)/n * bytes
  std::uint64_t messages_sent = 0;    // own messages (dense all_reduce calls not counted)
  int quantizations = 0;              // lossy encodings applied along any element's path
  bool dense_fallback = false;        // kSparse ran as a dense all_reduce this call
};

struct CompressionContext {
  const CompressionPlan* plan = nullptr;     // required
  CompressionState* state = nullptr;         // required unless the plan keeps no state
  std::uint64_t tensor_id = 0;               // < 2^56; names residuals and RNG streams
  std::uint64_t step = 0;                    // RNG key and top-k warm-up; equal on every rank
  std::uint64_t seed = 0;                    // cluster-wide RNG seed
  std::span<const MatrixShape> shapes = {};  // PowerSGD: the matrices of the flat tensor
  CompressionStats* stats = nullptr;         // optional
};

// data[0..count) := op over ranks of data (kSum or kAvg; kAvg divides by n at the end).
Status compressed_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                             const CompressionContext& context,
                             const algorithms::CollectiveOptions& options);

}  // namespace tributary::compression
