// CompressionAttempt (compression_attempt.h): save what a run overwrites, put it back
// unless committed.
#include "compression/collectives/compression_attempt.h"

#include <algorithm>

#include "core/check.h"

namespace tributary::compression::collectives {
namespace {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

// Copies [offset, offset + n) of `from` into the same place of `to` (grown as needed)
// and records the range.
void save_range(std::span<const float> from, std::size_t offset, std::size_t n,
                std::vector<float>& to, Ranges& saved) {
  if (n == 0) return;
  if (to.size() < from.size()) to.resize(from.size());
  std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(offset), n,
              to.begin() + static_cast<std::ptrdiff_t>(offset));
  saved.emplace_back(offset, n);
}

void put_back(const std::vector<float>& from, const Ranges& saved, std::span<float> to) {
  for (const auto& [offset, n] : saved) {
    std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(offset), n,
                to.begin() + static_cast<std::ptrdiff_t>(offset));
  }
}

}  // namespace

CompressionAttempt::CompressionAttempt(CompressionState& state, std::uint64_t tensor)
    : state_(state), tensor_(tensor) {
  TRIB_CHECK(state_.open_ == nullptr) << "an attempt on tensor " << state_.open_->tensor()
                                      << " is still open on this CompressionState (one at a time)";
  state_.open_ = this;
  state_.undo_.forget();
  state_.release_deferred_ = false;
}

CompressionAttempt::~CompressionAttempt() {
  if (!committed_) {
    restore();
    finish_deferred_view();
  }
  if (state_.open_ == this) state_.open_ = nullptr;  // a committed one already let go
}

void CompressionAttempt::commit() {
  TRIB_CHECK(!committed_) << "attempt on tensor " << tensor_ << " committed twice";
  committed_ = true;
  state_.undo_.forget();
  finish_deferred_view();
  state_.open_ = nullptr;
}

void CompressionAttempt::rollback() {
  TRIB_CHECK(!committed_) << "attempt on tensor " << tensor_ << " rolled back after its commit";
  restore();
  finish_deferred_view();
}

void CompressionAttempt::begin_run(std::size_t count) {
  rollback();
  state_.undo_.count = count;
}

void CompressionAttempt::restore() {
  CompressionState::Undo& u = state_.undo_;
  const std::uint64_t key = ErrorFeedback::key(tensor_, CompressionState::kStageWorker);
  ErrorFeedback& worker = state_.worker_;
  if (u.worker_seen && !u.worker_present) {
    worker.reset(key);
  } else if (u.worker_seen && worker.contains(key)) {
    if (!u.worker_saved.empty())
      put_back(u.residual, u.worker_saved, worker.residual(key, u.count));
    if (!u.momentum_saved.empty())
      put_back(u.momentum, u.momentum_saved, worker.momentum(key, u.count));
  }
  if (const auto it = state_.owner_.find(tensor_); it != state_.owner_.end())
    put_back(u.owner, u.owner_saved, it->second.residual);
  if (u.powersgd_seen && !u.powersgd) {
    state_.powersgd_.erase(tensor_);
  } else if (u.powersgd_seen) {
    // If the object was replaced since (another layout or seed), rebuild the one that was
    // saved, then put its state back.
    const CompressionState::Undo::PowerSgdState& p = *u.powersgd;
    Result<PowerSgd*> ps = state_.powersgd(tensor_, p.total_count, p.shapes, p.params);
    TRIB_CHECK(ps.is_ok()) << "a PowerSGD layout that was valid no longer is: "
                           << ps.status().to_string();
    (*ps)->restore(p.state);
  }
  u.forget();
}

void CompressionAttempt::finish_deferred_view() {
  if (!state_.release_deferred_) return;
  state_.release_deferred_ = false;
  state_.release_owner(tensor_);
}

std::uint64_t CompressionAttempt::touch_worker() {
  CompressionState::Undo& u = state_.undo_;
  const std::uint64_t key = ErrorFeedback::key(tensor_, CompressionState::kStageWorker);
  if (!u.worker_seen) {
    u.worker_seen = true;
    u.worker_present = state_.worker_.contains(key);  // absent before: rollback erases it
  }
  return key;
}

std::span<float> CompressionAttempt::worker_residual(std::size_t offset, std::size_t n) {
  CompressionState::Undo& u = state_.undo_;
  const std::span<float> r = state_.worker_.residual(touch_worker(), u.count);
  if (u.worker_present) save_range(r, offset, n, u.residual, u.worker_saved);
  return r.subspan(offset, n);
}

std::span<float> CompressionAttempt::worker_momentum(std::size_t offset, std::size_t n) {
  CompressionState::Undo& u = state_.undo_;
  const std::span<float> m = state_.worker_.momentum(touch_worker(), u.count);
  if (u.worker_present) save_range(m, offset, n, u.momentum, u.momentum_saved);
  return m.subspan(offset, n);
}

std::span<float> CompressionAttempt::owner_residual(std::size_t offset, std::size_t n) {
  const auto it = state_.owner_.find(tensor_);
  TRIB_CHECK(it != state_.owner_.end()) << "no owner residual settled for tensor " << tensor_;
  const std::span<float> r = it->second.residual;
  save_range(r, offset, n, state_.undo_.owner, state_.undo_.owner_saved);
  return r.subspan(offset, n);
}

Result<PowerSgd*> CompressionAttempt::powersgd(std::span<const MatrixShape> shapes,
                                               const PowerSgdParams& params) {
  CompressionState::Undo& u = state_.undo_;
  if (!u.powersgd_seen) {
    u.powersgd_seen = true;
    if (const auto it = state_.powersgd_.find(tensor_);
        it != state_.powersgd_.end() && it->second.psgd) {
      const CompressionState::PowerSgdEntry& e = it->second;
      u.powersgd = CompressionState::Undo::PowerSgdState{e.total_count, e.shapes, e.params,
                                                         e.psgd->snapshot()};
    }
  }
  return state_.powersgd(tensor_, u.count, shapes, params);
}

}  // namespace tributary::compression::collectives
