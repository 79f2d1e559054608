// One compressed collective on one tensor, as a transaction on a CompressionState: what
// the collective changes there (the stage-1 and stage-2 residuals, top-k momentum, the
// PowerSGD object) stays only if the attempt commits.
//
// Why: a collective is all-or-nothing (docs/fault-tolerance.md). A run can fail part-way
// (peer lost, timeout, bad frame), or return kOk on this member while the cluster then
// abandons the step (the agreement round broke and the coordinator did not commit it).
// Either way the survivors re-run it in the next epoch from their original input, and the
// residuals must be those from before the first run, or some gradient counts twice.
//
// How: the collective asks the attempt for each residual range just before it overwrites
// it, and the attempt saves that range first. The copy is of what changes, made piece by
// piece while earlier pieces are on the wire, into buffers the state keeps from attempt to
// attempt; there is no copy of the whole state before each attempt. PowerSGD rewrites its
// residual whole at the end of a run, so its object is saved whole.
//
// Guarantees:
//  - commit(): the changes stay, and the attempt is finished: no run, rollback() or
//    commit() may follow (TRIB_CHECK).
//  - rollback(): the state is as it was when the attempt opened, except for view-change
//    folds (below); the attempt stays open and may run again.
//  - Destroyed without commit(): rolled back.
//  - Runs: each run (compressed_all_reduce with ctx.attempt = this) starts from the state
//    as it was when the attempt opened: it first rolls back what an earlier run under the
//    same attempt changed. So a caller retries a collective under one attempt, epoch after
//    epoch, and commits only once the cluster agreed on a run. A run that fails rolls
//    itself back.
//  - One at a time: opening a second attempt on a state while one is open is a TRIB_CHECK
//    failure (compressed_all_reduce of a stateful plan without ctx.attempt, on a state
//    with an open attempt, returns kInvalidArgument instead). A committed attempt no
//    longer counts as open. Attempts one after another reuse the buffers.
//  - View changes while open: CompressionState::on_view_change() leaves this tensor's
//    stage-2 residual alone and folds (or drops) it when the attempt commits or rolls
//    back, so the fold takes the residual that the outcome leaves, exactly as if the view
//    change had come after the outcome. on_rejoin() drops everything, including what the
//    attempt would put back.
//  - The state must outlive the attempt and stay where it is. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "compression/collectives/compression_state.h"
#include "compression/powersgd.h"
#include "core/status.h"

namespace tributary::compression::collectives {

class CompressionAttempt {
 public:
  CompressionAttempt(CompressionState& state, std::uint64_t tensor);
  ~CompressionAttempt();
  CompressionAttempt(const CompressionAttempt&) = delete;
  CompressionAttempt& operator=(const CompressionAttempt&) = delete;

  void commit();
  void rollback();

  std::uint64_t tensor() const { return tensor_; }
  bool on(const CompressionState& state) const { return &state_ == &state; }
  bool committed() const { return committed_; }

  // ---- for the collective that runs under the attempt (compressed_all_reduce) ----
  // Starts a run over a tensor of `count` elements: rolls back an earlier run first.
  void begin_run(std::size_t count);
  // The stage-1 residual and the DGC momentum of elements [offset, offset + n), saved
  // before they are handed out. Ask for each element at most once per run.
  std::span<float> worker_residual(std::size_t offset, std::size_t n);
  std::span<float> worker_momentum(std::size_t offset, std::size_t n);
  // Elements [offset, offset + n) of the owner residual's slice (offsets within the
  // slice). The run settles slice ownership (CompressionState::owner_residual) first.
  std::span<float> owner_residual(std::size_t offset, std::size_t n);
  // CompressionState::powersgd(), the object saved whole the first time in a run.
  Result<PowerSgd*> powersgd(std::span<const MatrixShape> shapes, const PowerSgdParams& params);

 private:
  void restore();
  void finish_deferred_view();
  std::uint64_t touch_worker();  // records whether the stage-1 entry existed; its key

  CompressionState& state_;
  std::uint64_t tensor_;
  bool committed_ = false;
};

}  // namespace tributary::compression::collectives
