// Per-worker state of the compressed collectives: the error-feedback residuals of both
// stages and the PowerSGD objects, keyed by tensor id (< 2^56), plus scratch buffers
// reused from call to call. One per worker, alive across views. Not thread-safe.
//
// Membership policy (docs/compression.md, "Residuals across membership changes"):
//  - view change: stage-1 residuals and PowerSGD residuals are kept (this worker's unsent
//    gradient); stage-2 residuals whose (group size, slice) no longer match are folded or
//    dropped per OwnerResidualPolicy. compressed_all_reduce applies the same rule lazily
//    if on_view_change() was not called. While a CompressionAttempt is open on a tensor,
//    that tensor's fold waits until the attempt commits or rolls back, so that it folds
//    the residual the attempt's outcome leaves (compression_attempt.h).
//  - rejoin after this worker's own eviction: on_rejoin() drops everything.
//  - a collective: its changes are all-or-nothing through CompressionAttempt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "compression/error_feedback.h"
#include "compression/powersgd.h"
#include "core/status.h"

namespace tributary::compression::collectives {

class CompressionAttempt;

// What happens to an owner's stage-2 residual when slice ownership changes (the group
// size or this rank's position changed): kFold adds it into this worker's own stage-1
// residual at the same elements, so that mass is sent again, once, by one rank in the
// next step (nothing lost, nothing doubled); kDrop discards it.
enum class OwnerResidualPolicy : std::uint8_t { kFold, kDrop };

// The stage-2 residual an owner keeps for its slice of one tensor, valid for the slice
// ownership of the view it was made in.
struct OwnerResidual {
  int group_size = 0;
  int slice = 0;
  std::size_t offset = 0;        // the slice's first element in the tensor
  std::size_t tensor_count = 0;  // the tensor's elements
  std::vector<float> residual;   // the slice's elements
};

class CompressionState {
 public:
  explicit CompressionState(OwnerResidualPolicy policy = OwnerResidualPolicy::kFold)
      : policy_(policy) {}

  static constexpr std::uint32_t kStageWorker = 1;  // ErrorFeedback stage byte, stage 1
  static constexpr std::uint32_t kStageOwner = 2;   // RNG stream stage byte, stage 2

  // Stage-1 residuals (and top-k momentum) under ErrorFeedback::key(tensor, kStageWorker).
  // Writes to them during a collective go through its CompressionAttempt.
  ErrorFeedback& worker() { return worker_; }
  const ErrorFeedback& worker() const { return worker_; }

  // The owner residual of `tensor` for slice `slice` of `group_size`, [offset, offset +
  // count) of a tensor of tensor_count elements. An entry recorded for another (group
  // size, slice, offset, count, tensor_count) is first folded or dropped per the policy.
  std::span<float> owner_residual(std::uint64_t tensor, std::size_t tensor_count, int group_size,
                                  int slice, std::size_t offset, std::size_t count);
  const OwnerResidual* find_owner_residual(std::uint64_t tensor) const;
  bool has_owner_residual(std::uint64_t tensor) const { return owner_.count(tensor) != 0; }
  double owner_residual_norm2(std::uint64_t tensor) const;

  // The PowerSgd of `tensor` for this layout; created on first use or when the layout or
  // parameters change (which drops its residual and warm start).
  Result<PowerSgd*> powersgd(std::uint64_t tensor, std::size_t total_count,
                             std::span<const MatrixShape> shapes, const PowerSgdParams& params);
  const PowerSgd* find_powersgd(std::uint64_t tensor) const;

  // The group changed: this worker is now `new_rank` of `new_size`.
  void on_view_change(int new_size, int new_rank);
  // This worker was evicted and rejoins: all state goes, including what an open
  // attempt would have put back.
  void on_rejoin();

  OwnerResidualPolicy policy() const { return policy_; }
  // The attempt open on this state, if any (at most one at a time). The attempt refers
  // to the state: a state must not move or die while an attempt is open on it.
  const CompressionAttempt* open_attempt() const { return open_; }

  // Buffers the collectives reuse from call to call (not state: never rolled back), so a
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

 private:
  friend class CompressionAttempt;

  struct PowerSgdEntry {
    std::size_t total_count = 0;
    std::vector<MatrixShape> shapes;
    PowerSgdParams params;
    std::optional<PowerSgd> psgd;
  };
  // What the open attempt puts back on rollback: the ranges it saved just before they
  // were overwritten. The buffers are kept from attempt to attempt (not shrunk), so
  // saving costs a copy, not a page fault.
  struct Undo {
    bool worker_seen = false;     // the run reached the stage-1 residual
    bool worker_present = false;  // ... which existed before the run
    std::size_t count = 0;
    std::vector<float> residual;  // count floats; valid on worker_saved
    std::vector<float> momentum;  // count floats; valid on momentum_saved
    std::vector<float> owner;     // the owner residual; valid on owner_saved
    std::vector<std::pair<std::size_t, std::size_t>> worker_saved, momentum_saved, owner_saved;
    bool powersgd_seen = false;  // the run reached the PowerSgd object
    struct PowerSgdState {
      std::size_t total_count = 0;
      std::vector<MatrixShape> shapes;
      PowerSgdParams params;
      PowerSgd::Snapshot state;
    };
    std::optional<PowerSgdState> powersgd;  // the object before the run; none: absent
    void forget();
  };

  void release_owner(std::uint64_t tensor);  // fold or drop, then erase

  OwnerResidualPolicy policy_;
  ErrorFeedback worker_;
  std::map<std::uint64_t, OwnerResidual> owner_;
  std::map<std::uint64_t, PowerSgdEntry> powersgd_;
  Scratch scratch_;
  CompressionAttempt* open_ = nullptr;
  Undo undo_;
  // A view change moved the slice ownership of the open attempt's tensor: its owner
  // residual is released once the attempt commits or rolls back.
  bool release_deferred_ = false;
};

}  // namespace tributary::compression::collectives
