// SGD with momentum and optional L2 weight decay over one flat parameter buffer, in the
// form PyTorch uses (dampening 0, not Nesterov):
//   v <- momentum * v + (g + weight_decay * p)
//   p <- p - learning_rate * v
//
// The momentum buffer is training state: a worker joining a running job must receive it
// along with the parameters, or its first steps diverge from its peers'. momentum()
// exposes it as a span for exactly that; it starts at zero.
//
// Guarantees: step() is elementwise and deterministic, so replicas that start with equal
// params and momentum and step with equal (all-reduced) gradients stay bit-identical.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tributary::training {

// Defaults are the digits recipe (data/README.md): 4 workers x batch 16, momentum 0.9.
struct SgdOptions {
  float learning_rate = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;  // applied to every parameter, biases included
};

class Sgd {
 public:
  Sgd(std::size_t num_params, SgdOptions options);

  // params and grads must both have num_params elements (checked).
  void step(std::span<float> params, std::span<const float> grads);

  std::span<float> momentum() { return velocity_; }
  std::span<const float> momentum() const { return velocity_; }

  const SgdOptions& options() const { return options_; }
  // For schedules: the new rate applies from the next step; momentum is kept.
  void set_learning_rate(float learning_rate) { options_.learning_rate = learning_rate; }

 private:
  SgdOptions options_;
  std::vector<float> velocity_;
};

}  // namespace tributary::training
