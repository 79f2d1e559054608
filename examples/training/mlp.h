// A 64-64-10 multilayer perceptron (ReLU hidden layer, softmax cross-entropy) whose
// parameters and gradients each live in ONE contiguous float32 buffer, so a data-parallel
// caller all-reduces a single span and an optimiser updates a single span.
//
// Guarantees:
//  - Buffer layout is fixed and described by tensors(): W1 [64x64], b1 [64], W2 [10x64],
//    b2 [10], back to back from offset 0; weights are row-major [out][in].
//  - The same seed gives bit-identical initial parameters (He-normal W1, Xavier-normal W2,
//    zero biases), so replicas start in agreement without a broadcast.
//  - forward_backward() is deterministic: the same parameters and batch give bit-identical
//    gradients, whatever the batch came from.
//  - params() and grads() stay valid (same address, same size) for the model's lifetime.
//    Copying a model copies both buffers.
//
// forward_backward() writes grads(), so give each worker (thread) its own Mlp; evaluate()
// only reads and may run concurrently on one model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "examples/training/dataset.h"

namespace tributary::training {

// One named block of the flat parameter buffer: rows*cols floats at `offset`.
// Biases are cols == 1 vectors.
struct Tensor {
  std::string_view name;
  std::size_t offset;
  std::size_t rows;
  std::size_t cols;
  std::size_t size() const { return rows * cols; }
};

struct Evaluation {
  double accuracy = 0;   // fraction in [0, 1]
  double mean_loss = 0;  // mean cross-entropy (nats)
};

class Mlp {
 public:
  static constexpr std::size_t kInputs = kDigitsFeatures;
  static constexpr std::size_t kHidden = 64;
  static constexpr std::size_t kOutputs = kDigitsClasses;
  static constexpr std::size_t kNumParams =
      kHidden * kInputs + kHidden + kOutputs * kHidden + kOutputs;  // 4810

  explicit Mlp(std::uint64_t seed);

  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }
  std::span<const float> grads() const { return grads_; }

  // All four blocks in buffer order, covering [0, kNumParams) without gaps.
  static std::span<const Tensor> tensors();
  // The 2-D weight matrices only (W1, W2): what low-rank compressors such as PowerSGD
  // factorise; the biases are small and travel uncompressed.
  static std::span<const Tensor> weight_matrices();

  // Forward and backward over the rows `batch` of `data` (non-empty, indices < size()).
  // Overwrites grads() with the gradient of the mean loss over the batch and returns that
  // mean loss. params() are not changed.
  float forward_backward(const Dataset& data, std::span<const std::size_t> batch);

  // Accuracy and mean loss over every row of `data` (non-empty). Touches no buffers.
  Evaluation evaluate(const Dataset& data) const;

 private:
  std::vector<float> params_;
  std::vector<float> grads_;
};

}  // namespace tributary::training
