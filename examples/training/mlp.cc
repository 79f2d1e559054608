#include "examples/training/mlp.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/check.h"
#include "examples/training/rng.h"

namespace tributary::training {
namespace {

constexpr std::size_t kIn = Mlp::kInputs;
constexpr std::size_t kHid = Mlp::kHidden;
constexpr std::size_t kOut = Mlp::kOutputs;

constexpr std::size_t kW1 = 0;
constexpr std::size_t kB1 = kW1 + kHid * kIn;
constexpr std::size_t kW2 = kB1 + kHid;
constexpr std::size_t kB2 = kW2 + kOut * kHid;
static_assert(kB2 + kOut == Mlp::kNumParams);

constexpr std::array<Tensor, 4> kTensors{{
    {"w1", kW1, kHid, kIn},
    {"b1", kB1, kHid, 1},
    {"w2", kW2, kOut, kHid},
    {"b2", kB2, kOut, 1},
}};
constexpr std::array<Tensor, 2> kMatrices{{kTensors[0], kTensors[2]}};

// Activations of one sample; the backward pass reuses them.
struct Activations {
  std::array<float, kHid> hidden;  // after ReLU
  std::array<float, kOut> logits;
};

void forward(const float* p, std::span<const float> x, Activations& a) {
  const float* w1 = p + kW1;
  const float* b1 = p + kB1;
  const float* w2 = p + kW2;
  const float* b2 = p + kB2;
  for (std::size_t j = 0; j < kHid; ++j) {
    float s = b1[j];
    const float* row = w1 + j * kIn;
    for (std::size_t i = 0; i < kIn; ++i) s += row[i] * x[i];
    a.hidden[j] = s > 0.0f ? s : 0.0f;
  }
  for (std::size_t k = 0; k < kOut; ++k) {
    float s = b2[k];
    const float* row = w2 + k * kHid;
    for (std::size_t j = 0; j < kHid; ++j) s += row[j] * a.hidden[j];
    a.logits[k] = s;
  }
}

// Softmax of the logits into `probs`; returns the cross-entropy for `label`. Shifting by
// the max logit keeps exp() finite however large the logits grow.
double softmax_xent(const std::array<float, kOut>& logits, std::size_t label,
                    std::array<float, kOut>& probs) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (std::size_t k = 0; k < kOut; ++k) {
    probs[k] = std::exp(logits[k] - max_logit);
    sum += probs[k];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& q : probs) q *= inv;
  return std::log(sum) - static_cast<double>(logits[label] - max_logit);
}

}  // namespace

Mlp::Mlp(std::uint64_t seed) : params_(kNumParams, 0.0f), grads_(kNumParams, 0.0f) {
  Rng rng(seed);
  // He init suits the ReLU layer; Xavier the linear layer feeding softmax.
  const double w1_std = std::sqrt(2.0 / static_cast<double>(kIn));
  const double w2_std = std::sqrt(2.0 / static_cast<double>(kHid + kOut));
  for (std::size_t i = 0; i < kHid * kIn; ++i) {
    params_[kW1 + i] = static_cast<float>(w1_std * rng.normal());
  }
  for (std::size_t i = 0; i < kOut * kHid; ++i) {
    params_[kW2 + i] = static_cast<float>(w2_std * rng.normal());
  }
}

std::span<const Tensor> Mlp::tensors() { return kTensors; }
std::span<const Tensor> Mlp::weight_matrices() { return kMatrices; }

float Mlp::forward_backward(const Dataset& data, std::span<const std::size_t> batch) {
  TRIB_CHECK(!batch.empty()) << "empty batch";
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  const float* p = params_.data();
  float* g = grads_.data();
  const float scale = 1.0f / static_cast<float>(batch.size());

  double loss_sum = 0;
  Activations a;
  std::array<float, kOut> dlogits;
  std::array<float, kHid> dhidden;
  for (const std::size_t n : batch) {
    TRIB_CHECK(n < data.size()) << "row " << n << " of " << data.size();
    const auto x = data.row(n);
    const std::size_t label = data.labels[n];
    TRIB_CHECK(label < kOut) << "label " << label << " at row " << n;
    forward(p, x, a);
    loss_sum += softmax_xent(a.logits, label, dlogits);
    // d(mean loss)/d(logits) = (softmax - onehot) / batch.
    dlogits[label] -= 1.0f;
    for (float& d : dlogits) d *= scale;

    dhidden.fill(0.0f);
    for (std::size_t k = 0; k < kOut; ++k) {
      const float d = dlogits[k];
      const float* w2row = p + kW2 + k * kHid;
      float* gw2row = g + kW2 + k * kHid;
      for (std::size_t j = 0; j < kHid; ++j) {
        gw2row[j] += d * a.hidden[j];
        dhidden[j] += d * w2row[j];
      }
      g[kB2 + k] += d;
    }
    for (std::size_t j = 0; j < kHid; ++j) {
      // ReLU passes gradient only where it was active (hidden > 0).
      if (a.hidden[j] <= 0.0f) continue;
      const float d = dhidden[j];
      float* gw1row = g + kW1 + j * kIn;
      for (std::size_t i = 0; i < kIn; ++i) gw1row[i] += d * x[i];
      g[kB1 + j] += d;
    }
  }
  return static_cast<float>(loss_sum / static_cast<double>(batch.size()));
}

Evaluation Mlp::evaluate(const Dataset& data) const {
  TRIB_CHECK(data.size() > 0) << "empty dataset";
  Activations a;
  std::array<float, kOut> probs;
  double loss_sum = 0;
  std::size_t correct = 0;
  for (std::size_t n = 0; n < data.size(); ++n) {
    TRIB_CHECK(data.labels[n] < kOut) << "label " << int{data.labels[n]} << " at row " << n;
    forward(params_.data(), data.row(n), a);
    loss_sum += softmax_xent(a.logits, data.labels[n], probs);
    const auto best = std::max_element(a.logits.begin(), a.logits.end()) - a.logits.begin();
    if (static_cast<std::size_t>(best) == data.labels[n]) ++correct;
  }
  const auto rows = static_cast<double>(data.size());
  return {static_cast<double>(correct) / rows, loss_sum / rows};
}

}  // namespace tributary::training
