// The digits training recipe: what tests/compression/compressed_convergence_test.cc
// proves for every codec and what `tributary demo` runs, defined once so the two cannot
// drift apart. Both call the same three functions around their all-reduce:
//
//   clip_local_gradient(recipe, codec, grad, world)      before it (sparse codecs only)
//   all-reduce (avg), through the codec
//   apply_update(recipe, sgd, params, grad, epochs_done) after it
//
// with the optimizer from make_optimizer(recipe, codec, n).
//
// What the recipe is: per worker batches of 16, 30 epochs, SGD with heavy-ball momentum
// 0.9, learning rate 0.1 decayed to 0 on a cosine over the run (as a function of the
// epochs done, so an elastic run whose steps per epoch change keeps the same curve).
// Codec-specific parts, chosen by measurement (docs/compression.md):
//  - a codec that corrects momentum itself (sign, top-k with momentum=m) keeps the
//    velocity, so the optimizer runs without momentum;
//  - a sparse codec (top-k) gets DGC's local gradient clipping: each worker's gradient is
//    scaled to an L2 norm of at most clip_norm / sqrt(world).
//
// The training library does not depend on compression/: callers describe their codec
// with GradientCodec (from Codec::wants_momentum() and the plan's kind).
#pragma once

#include <cstddef>
#include <span>

#include "examples/training/sgd.h"

namespace tributary::training {

struct Recipe {
  int epochs = 30;              // passes over the training shards
  std::size_t batch_size = 16;  // per worker
  float learning_rate = 0.1f;   // at the start; cosine-decayed to 0 at `epochs`
  float momentum = 0.9f;        // heavy ball (in the optimizer or in the codec)
  // Global gradient-norm bound behind DGC's local clipping (a worker clips to
  // clip_norm / sqrt(world)); applied to sparse codecs only. 0 = off.
  float clip_norm = 2.0f;
};

// How the gradient codec meets the recipe.
struct GradientCodec {
  bool applies_momentum = false;  // Codec::wants_momentum(): the optimizer must not
  bool sparse = false;            // top-k: DGC local gradient clipping applies
};

// The learning rate after `epochs_done` (fractional) epochs.
float learning_rate_at(const Recipe& recipe, double epochs_done);

// SGD for `num_params` parameters: the recipe's momentum, unless the codec applies it.
Sgd make_optimizer(const Recipe& recipe, const GradientCodec& codec, std::size_t num_params);

// DGC local gradient clipping for a sparse codec (a no-op otherwise): scales `grad` to an
// L2 norm of at most clip_norm / sqrt(world_size). Deterministic (the norm is summed in
// double, in order). Returns the factor applied (1 when nothing changed).
float clip_local_gradient(const Recipe& recipe, const GradientCodec& codec, std::span<float> grad,
                          int world_size);

// One optimizer step with the averaged gradient, at the rate for `epochs_done`.
void apply_update(const Recipe& recipe, Sgd& sgd, std::span<float> params,
                  std::span<const float> averaged_grad, double epochs_done);

}  // namespace tributary::training
