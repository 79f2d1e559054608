// Refitting the cost model's alpha and beta to the all-reduces a member has run
// (docs/algorithms.md, "Refitting as collectives run").
//
// A CostRefit keeps the last `window` observations of one member's successful all-reduces
// in one view (algorithm, group size, bytes, seconds) and fits alpha and beta to them by
// least squares against the model's own terms (CostModel::link_terms): measured time =
// alpha * per_alpha + beta * per_beta + rest, for each observation. Pure: no clocks, no
// links; the Worker feeds it and agrees on the result with the other members.
//
// - Noise on a busy machine, and a peer that arrives late, only ever add time: each
//   (algorithm, size, bytes) counts once, at its fastest observation.
// - The fit minimises relative errors (weights 1 / seconds^2): a 4 KiB all-reduce of 30 us
//   counts as much as a 16 MiB one of 10 ms.
// - No fit unless the window holds kMinObservations and at least two kinds whose
//   per_beta / per_alpha differ by kMinSpread: one size, or sizes that all cost the same
//   mix of messages and bytes, cannot tell alpha from beta.
// - A constant the least squares put at or below its floor (noise around a term too
//   small to measure: beta on an in-memory link, alpha for huge messages) keeps the base
//   model's value, and the other is fitted alone; both end within [kMin, kMax].
// - The terms depend on which piece of the (piecewise linear) model the constants fall
//   on, so the fit is repeated from its own result a few times.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "algorithms/collectives.h"
#include "algorithms/cost_model.h"

namespace tributary::algorithms {

struct RefitObservation {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing;  // never kAuto
  int world_size = 0;
  std::size_t bytes = 0;
  double seconds = 0;
};

struct LinkFit {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte
};

class CostRefit {
 public:
  static constexpr std::size_t kDefaultWindow = 64;
  static constexpr std::size_t kMinObservations = 8;
  static constexpr double kMinSpread = 2.0;
  // 100 ns .. 10 s per message; 10 TB/s .. 100 KB/s.
  static constexpr double kMinAlpha = 1e-7;
  static constexpr double kMaxAlpha = 10.0;
  static constexpr double kMinBeta = 1e-13;
  static constexpr double kMaxBeta = 1e-5;

  explicit CostRefit(std::size_t window = kDefaultWindow) : window_(window) {}

  // Ignores what cannot be fitted: kAuto, world_size <= 1, seconds not positive or not
  // finite. The oldest observation leaves when the window is full.
  void observe(const RefitObservation& observation);
  void clear() { observations_.clear(); }
  std::size_t size() const { return observations_.size(); }

  // alpha and beta fitted over the window, with `base` supplying gamma, the chunk size, the
  // cores and the fallbacks; nullopt when the window cannot define them (see the top).
  // Without zones only: the observations are priced as flat all-reduces.
  std::optional<LinkFit> fit(const CostModel& base) const;

 private:
  std::size_t window_;
  std::deque<RefitObservation> observations_;
};

}  // namespace tributary::algorithms
