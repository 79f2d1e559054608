// CompressionState (compression_state.h): residuals across views.
#include "compression/collectives/compression_state.h"

#include <algorithm>
#include <utility>

#include "compression/collectives/compression_attempt.h"

namespace tributary::compression::collectives {

std::span<float> CompressionState::owner_residual(std::uint64_t tensor, std::size_t tensor_count,
                                                  int group_size, int slice, std::size_t offset,
                                                  std::size_t count) {
  auto it = owner_.find(tensor);
  if (it != owner_.end()) {
    const OwnerResidual& o = it->second;
    if (o.group_size != group_size || o.slice != slice || o.offset != offset ||
        o.residual.size() != count || o.tensor_count != tensor_count) {
      release_owner(tensor);
      it = owner_.end();
    }
  }
  if (it == owner_.end()) {
    OwnerResidual o;
    o.group_size = group_size;
    o.slice = slice;
    o.offset = offset;
    o.tensor_count = tensor_count;
    o.residual.assign(count, 0.0f);
    it = owner_.emplace(tensor, std::move(o)).first;
  }
  return it->second.residual;
}

const OwnerResidual* CompressionState::find_owner_residual(std::uint64_t tensor) const {
  const auto it = owner_.find(tensor);
  return it == owner_.end() ? nullptr : &it->second;
}

double CompressionState::owner_residual_norm2(std::uint64_t tensor) const {
  const OwnerResidual* o = find_owner_residual(tensor);
  double s = 0;
  if (o != nullptr)
    for (float x : o->residual) s += static_cast<double>(x) * x;
  return s;
}

void CompressionState::release_owner(std::uint64_t tensor) {
  const auto it = owner_.find(tensor);
  if (it == owner_.end()) return;
  const OwnerResidual& o = it->second;
  // Folding needs the worker residual of the same tensor size; a tensor that changed size
  // has lost its residuals anyway (error_feedback.h), so there is nothing to fold into.
  if (policy_ == OwnerResidualPolicy::kFold && o.offset + o.residual.size() <= o.tensor_count) {
    const std::uint64_t key = ErrorFeedback::key(tensor, kStageWorker);
    std::span<float> w = worker_.residual(key, o.tensor_count);
    for (std::size_t i = 0; i < o.residual.size(); ++i) w[o.offset + i] += o.residual[i];
  }
  owner_.erase(it);
}

Result<PowerSgd*> CompressionState::powersgd(std::uint64_t tensor, std::size_t total_count,
                                             std::span<const MatrixShape> shapes,
                                             const PowerSgdParams& params) {
  PowerSgdEntry& e = powersgd_[tensor];
  const auto same_shape = [](const MatrixShape& a, const MatrixShape& b) {
    return a.offset == b.offset && a.rows == b.rows && a.cols == b.cols;
  };
  const bool same =
      e.psgd && e.total_count == total_count &&
      std::equal(shapes.begin(), shapes.end(), e.shapes.begin(), e.shapes.end(), same_shape) &&
      e.params.rank == params.rank && e.params.error_feedback == params.error_feedback &&
      e.params.warm_start == params.warm_start && e.params.seed == params.seed;
  if (!same) {
    Result<PowerSgd> made = PowerSgd::create(total_count, {shapes.begin(), shapes.end()}, params);
    if (!made.is_ok()) {
      powersgd_.erase(tensor);
      return made.status();
    }
    e.total_count = total_count;
    e.shapes.assign(shapes.begin(), shapes.end());
    e.params = params;
    e.psgd.emplace(std::move(made).value());
  }
  return &*e.psgd;
}

const PowerSgd* CompressionState::find_powersgd(std::uint64_t tensor) const {
  const auto it = powersgd_.find(tensor);
  return it == powersgd_.end() || !it->second.psgd ? nullptr : &*it->second.psgd;
}

void CompressionState::on_view_change(int new_size, int new_rank) {
  std::vector<std::uint64_t> stale;
  for (const auto& [tensor, o] : owner_) {
    if (o.group_size != new_size || o.slice != new_rank) stale.push_back(tensor);
  }
  for (std::uint64_t t : stale) {
    if (open_ != nullptr && open_->tensor() == t) {
      release_deferred_ = true;  // the attempt's outcome decides which residual to fold
    } else {
      release_owner(t);
    }
  }
}

void CompressionState::on_rejoin() {
  worker_.reset_all();
  owner_.clear();
  powersgd_.clear();
  undo_.forget();
  release_deferred_ = false;
}

void CompressionState::Undo::forget() {
  worker_seen = worker_present = powersgd_seen = false;
  worker_saved.clear();
  momentum_saved.clear();
  owner_saved.clear();
  powersgd.reset();
}

}  // namespace tributary::compression::collectives
