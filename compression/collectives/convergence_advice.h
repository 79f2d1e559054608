// What the convergence evidence says about training with a compression plan, so that a
// configuration known not to converge is refused or warned about instead of silently
// accepted (the CLI asks before any worker starts; docs/compression.md has the numbers).
//
// The verdicts come from tests/compression/compressed_convergence_test.cc (the digits
// recipe of examples/training/recipe.h: SGD with momentum 0.9, 4 workers, IID and
// label-sorted shards): that test asserts that every configuration answered with
// kLosesAccuracy or kDiverges here fails its gate, and every default passes. Anything
// the evidence does not cover is kNoKnownIssue, not "proven".
#pragma once

#include <string>

#include "compression/collectives/compression_plan.h"

namespace tributary::compression::collectives {

// The lowest top-k density that stays within the gate on both shardings (0.1%: k = 5 of
// the MLP's 4810 gradients per worker and step); below it the CLI warns.
inline constexpr double kTopKDensityFloor = 0.001;

struct ConvergenceAdvice {
  enum class Verdict {
    kNoKnownIssue,   // the defaults, and anything the evidence does not flag
    kLosesAccuracy,  // measured outside the gate: warn
    kDiverges,       // measured far off (training breaks): refuse
  };
  Verdict verdict = Verdict::kNoKnownIssue;
  std::string message;  // empty for kNoKnownIssue; says what was measured and the fix
};

// For a training loop that applies heavy-ball momentum in the optimizer unless the codec
// corrects momentum itself (Codec::wants_momentum()), as the recipe does.
ConvergenceAdvice advise_training(const CompressionPlan& plan);

}  // namespace tributary::compression::collectives
