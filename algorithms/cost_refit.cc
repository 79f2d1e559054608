#include "algorithms/cost_refit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tributary::algorithms {
namespace {

// Fixed-point rounds of the fit (the terms are re-taken at each round's result).
constexpr int kRounds = 4;

double clamp_alpha(double a) { return std::clamp(a, CostRefit::kMinAlpha, CostRefit::kMaxAlpha); }
double clamp_beta(double b) { return std::clamp(b, CostRefit::kMinBeta, CostRefit::kMaxBeta); }

}  // namespace

void CostRefit::observe(const RefitObservation& o) {
  if (o.algorithm == AllReduceAlgorithm::kAuto || o.world_size <= 1 || o.bytes == 0 ||
      !std::isfinite(o.seconds) || o.seconds <= 0 || window_ == 0) {
    return;
  }
  if (observations_.size() >= window_) observations_.pop_front();
  observations_.push_back(o);
}

std::optional<LinkFit> CostRefit::fit(const CostModel& base) const {
  if (observations_.size() < kMinObservations) return std::nullopt;
  // Each kind once, at its fastest.
  std::vector<RefitObservation> kinds;
  for (const auto& o : observations_) {
    auto same = std::find_if(kinds.begin(), kinds.end(), [&](const RefitObservation& k) {
      return k.algorithm == o.algorithm && k.world_size == o.world_size && k.bytes == o.bytes;
    });
    if (same == kinds.end()) {
      kinds.push_back(o);
    } else {
      same->seconds = std::min(same->seconds, o.seconds);
    }
  }
  if (kinds.size() < 2) return std::nullopt;

  const double fallback_alpha = clamp_alpha(base.alpha());
  const double fallback_beta = clamp_beta(base.beta());
  double alpha = fallback_alpha;
  double beta = fallback_beta;
  for (int round = 0; round < kRounds; ++round) {
    const CostModel at = base.with_link(alpha, beta);
    // Weighted normal equations of seconds - rest = alpha * per_alpha + beta * per_beta.
    double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const auto& k : kinds) {
      const CostModel::LinkTerms t = at.link_terms(k.algorithm, k.world_size, k.bytes);
      if (!(t.per_alpha > 0) || !(t.per_beta >= 0)) return std::nullopt;
      const double ratio = t.per_beta / t.per_alpha;
      lo = std::min(lo, ratio);
      hi = std::max(hi, ratio);
      const double w = 1.0 / (k.seconds * k.seconds);
      const double y = k.seconds - t.rest;
      s11 += w * t.per_alpha * t.per_alpha;
      s12 += w * t.per_alpha * t.per_beta;
      s22 += w * t.per_beta * t.per_beta;
      r1 += w * t.per_alpha * y;
      r2 += w * t.per_beta * y;
    }
    if (!(hi >= kMinSpread * lo)) return std::nullopt;
    const double det = s11 * s22 - s12 * s12;
    if (!(det > 1e-9 * s11 * s22)) return std::nullopt;
    double a = (r1 * s22 - r2 * s12) / det;
    double b = (s11 * r2 - s12 * r1) / det;
    if (a < kMinAlpha && b < kMinBeta) return std::nullopt;  // faster than the model's rest
    if (b < kMinBeta) {
      b = fallback_beta;
      a = (r1 - b * s12) / s11;
    } else if (a < kMinAlpha) {
      a = fallback_alpha;
      b = (r2 - a * s12) / s22;
    }
    if (!std::isfinite(a) || !std::isfinite(b)) return std::nullopt;
    a = clamp_alpha(a);
    b = clamp_beta(b);
    const bool settled = std::abs(a - alpha) <= 1e-9 * alpha && std::abs(b - beta) <= 1e-9 * beta;
    alpha = a;
    beta = b;
    if (settled) break;
  }
  return LinkFit{alpha, beta};
}

}  // namespace tributary::algorithms
