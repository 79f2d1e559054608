// ErrorFeedback store (error_feedback.h).
#include "compression/error_feedback.h"

#include <algorithm>

namespace tributary::compression {

ErrorFeedback::Entry& ErrorFeedback::entry(std::uint64_t id, std::size_t count) {
  Entry& e = entries_[id];
  if (e.count != count) {  // new tensor or a shape change: the old residual is void
    e.count = count;
    e.residual.clear();
    e.momentum.clear();
  }
  return e;
}

std::span<float> ErrorFeedback::residual(std::uint64_t id, std::size_t count) {
  Entry& e = entry(id, count);
  if (e.residual.size() != count) e.residual.assign(count, 0.0f);
  return e.residual;
}

std::span<float> ErrorFeedback::momentum(std::uint64_t id, std::size_t count) {
  Entry& e = entry(id, count);
  if (e.momentum.size() != count) e.momentum.assign(count, 0.0f);
  return e.momentum;
}

double ErrorFeedback::residual_norm2(std::uint64_t id) const {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return 0.0;
  double s = 0.0;
  for (float v : it->second.residual) s += static_cast<double>(v) * v;
  return s;
}

void ErrorFeedback::reset(std::uint64_t id) { entries_.erase(id); }

void ErrorFeedback::reset_all() { entries_.clear(); }

ErrorFeedback::Snapshot ErrorFeedback::snapshot(std::uint64_t id) const {
  Snapshot s;
  s.id = id;
  const auto it = entries_.find(id);
  if (it != entries_.end()) {
    s.present = true;
    s.residual = it->second.residual;
    s.momentum = it->second.momentum;
  }
  return s;
}

void ErrorFeedback::restore(const Snapshot& s) {
  if (!s.present) {
    entries_.erase(s.id);
    return;
  }
  Entry& e = entries_[s.id];
  e.count = std::max(s.residual.size(), s.momentum.size());
  e.residual = s.residual;
  e.momentum = s.momentum;
}

}  // namespace tributary::compression
