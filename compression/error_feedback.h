// Error-feedback state: one residual (and, for momentum correction, one velocity)
// per tensor, keyed by a caller-chosen tensor id.
//
// The residual is this worker's own gradient mass that a lossy codec has not sent yet:
// encode() compresses x + residual and keeps what did not make it into the payload.
// Ownership: the caller owns the store (one per worker, usually one per training
// process) and passes spans of it in EncodeOptions. Not thread-safe: one thread uses a
// store at a time, or the caller locks. Spans returned stay valid until the same id is
// reset, re-sized, or erased.
//
// Membership-change policy (docs/compression.md, "Error feedback and membership"):
//  - A view change (someone joined or left) keeps every residual: it is this worker's
//    unsent gradient, still owed to the model whatever the ring looks like.
//  - A worker that rejoins after being evicted calls reset_all(): the cluster moved on
//    without it, and it restarts from the state it was sent, so its old residuals
//    belong to parameters that no longer exist.
//  - A tensor whose element count changes loses its residual (residual() notices and
//    returns zeros); call reset(id) for a shape change that keeps the count.
//  - A collective aborted and re-run in epoch E+1 must re-encode from the *original*
//    input and the residual as it was before the aborted attempt: take a snapshot()
//    before encoding and restore() it on abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace tributary::compression {

class ErrorFeedback {
 public:
  // Key helper: several residuals per tensor (e.g. the quantized all-reduce keeps one
  // for the reduce-scatter stage and one for the owner's re-quantization).
  static constexpr std::uint64_t key(std::uint64_t tensor_id, std::uint32_t stage) {
    return (tensor_id << 8) | stage;
  }

  // The residual of `id`, sized `count`, zero-filled on first use or when the count
  // differs from the stored one (a shape change drops the residual, and the velocity).
  std::span<float> residual(std::uint64_t id, std::size_t count);
  // The momentum-correction velocity of `id` (sign, top-k), sized `count`, same rules.
  std::span<float> momentum(std::uint64_t id, std::size_t count);

  bool contains(std::uint64_t id) const { return entries_.count(id) != 0; }
  std::size_t size() const { return entries_.size(); }
  // Sum of squares of the residual (0 when absent): for logs and tests.
  double residual_norm2(std::uint64_t id) const;

  void reset(std::uint64_t id);  // drop one tensor's state
  void reset_all();              // drop everything (rejoin after eviction)

  // Copy of one tensor's state, to restore after an aborted collective.
  struct Snapshot {
    std::uint64_t id = 0;
    bool present = false;
    std::vector<float> residual;
    std::vector<float> momentum;
  };
  Snapshot snapshot(std::uint64_t id) const;
  void restore(const Snapshot& snapshot);

 private:
  struct Entry {
    std::size_t count = 0;
    std::vector<float> residual;
    std::vector<float> momentum;
  };
  Entry& entry(std::uint64_t id, std::size_t count);
  std::map<std::uint64_t, Entry> entries_;
};

}  // namespace tributary::compression
