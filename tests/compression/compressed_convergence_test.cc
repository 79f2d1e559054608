// Evidence that the compressed collectives keep accuracy: data-parallel training of the
// 64-64-10 MLP on the real digits (fixed 1347/450 split), 4 workers as threads over the
// in-memory fabric, each step's gradient averaged by compressed_all_reduce (the real
// collective, not a simulation), batch 16 per worker, SGD momentum 0.9, learning rate 0.1
// decayed to 0 over the 30 epochs on a cosine, 5 seeds, with IID and label-sorted
// (non-IID) shards.
//
// Why a cosine schedule rather than a constant 0.1: with a constant rate the final
// training loss is a snapshot of a still-noisy trajectory. Top-k's delayed (error-feedback)
// updates make that noise burstier, and on label-sorted shards one seed in five ended on
// a spike (0.076 against 0.006-0.014 for the other four), which alone decided the gate.
// Every row, the baseline included, uses the same schedule; docs/compression.md keeps
// the constant-rate table too.
//
// Gate per codec (mean over seeds, against the uncompressed run of the same shards):
// test accuracy >= uncompressed - 1.0 point AND final training loss <= 2x uncompressed.
// Controls that must FAIL the gate on non-IID shards, which shows the test can see damage:
// top-k 1% and sign, both without error feedback. One collective per step over the whole
// flat gradient (a single bucket), so codecs see all four tensors in one buffer. The table
// printed here is the one in docs/compression.md ("Convergence evidence").
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/memory_link.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "examples/training/batcher.h"
#include "examples/training/dataset.h"
#include "examples/training/mlp.h"
#include "examples/training/sgd.h"

namespace tributary::compression::collectives {
namespace {

using training::Batcher;
using training::Dataset;
using training::Mlp;
using training::Sgd;
using training::Sharding;
using training::TrainTestSplit;

constexpr int kWorkers = 4;
constexpr std::size_t kBatch = 16;
constexpr int kEpochs = 30;
constexpr int kSeeds = 5;
constexpr float kLearningRate = 0.1f;

// Cosine decay from kLearningRate at step 0 towards 0 at total_steps.
float cosine_rate(std::uint64_t step, std::uint64_t total_steps) {
  const double progress = static_cast<double>(step) / static_cast<double>(total_steps);
  return static_cast<float>(kLearningRate * 0.5 *
                            (1.0 + std::cos(3.14159265358979323846 * progress)));
}

const TrainTestSplit& digits() {
  static const TrainTestSplit split = [] {
    Result<Dataset> all = training::load_digits();
    EXPECT_TRUE(all.is_ok()) << all.status().to_string();
    Result<TrainTestSplit> s = training::split_train_test(all.is_ok() ? *all : Dataset{});
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(s).value() : TrainTestSplit{};
  }();
  return split;
}

std::vector<MatrixShape> mlp_shapes() {
  std::vector<MatrixShape> out;
  for (const training::Tensor& t : Mlp::weight_matrices())
    out.push_back({t.offset, t.rows, t.cols});
  return out;
}

struct Outcome {
  double test_accuracy = 0;
  double train_loss = 0;
  bool ok = true;  // every collective succeeded and the replicas stayed identical
};

// One training run: 4 worker threads, each with its own replica, optimiser, batcher and
// CompressionState, averaging every step's gradient with compressed_all_reduce.
Outcome train(const CompressionPlan& plan, Sharding sharding, std::uint64_t seed) {
  const Dataset& train_set = digits().train;
  const auto shards = training::shard_indices(train_set, kWorkers, sharding, seed);
  const std::size_t steps = Batcher::common_batches_per_epoch(shards, kBatch);
  const std::vector<MatrixShape> shapes = mlp_shapes();
  algorithms::MemoryFabric fabric(kWorkers);
  std::vector<Mlp> models(kWorkers, Mlp(seed));
  std::vector<int> failed(kWorkers, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      const auto uw = static_cast<std::size_t>(w);
      Mlp& model = models[uw];
      // DGC momentum correction (top-k with momentum=...) moves the momentum into the
      // codec; the optimiser must not apply it a second time.
      const bool codec_momentum = plan.codec && plan.codec->wants_momentum();
      Sgd sgd(Mlp::kNumParams, training::SgdOptions{.learning_rate = kLearningRate,
                                                    .momentum = codec_momentum ? 0.0f : 0.9f});
      Batcher batcher(shards[uw], kBatch, seed, uw);
      CompressionState state;
      std::vector<float> grad(Mlp::kNumParams);
      std::uint64_t step = 0;
      for (int epoch = 0; epoch < kEpochs && !failed[uw]; ++epoch) {
        batcher.start_epoch(static_cast<std::uint64_t>(epoch));
        for (std::size_t b = 0; b < steps; ++b, ++step) {
          model.forward_backward(train_set, batcher.batch(b));
          std::memcpy(grad.data(), model.grads().data(), grad.size() * sizeof(float));
          CompressionContext ctx;
          ctx.plan = &plan;
          ctx.state = &state;
          ctx.tensor_id = 1;
          ctx.step = step;
          ctx.seed = seed;
          ctx.shapes = shapes;
          algorithms::CollectiveOptions o;
          o.seq = step + 1;
          o.deadline = Deadline::after(std::chrono::seconds(30));
          const Status s = compressed_all_reduce(fabric.link(w), grad.data(), grad.size(),
                                                 ReduceOp::kAvg, ctx, o);
          if (!s.is_ok()) {
            ADD_FAILURE() << plan.spec << " worker " << w << " step " << step << ": "
                          << s.to_string();
            failed[uw] = 1;
            break;
          }
          sgd.set_learning_rate(cosine_rate(step, steps * kEpochs));
          sgd.step(model.params(), grad);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  Outcome o;
  for (int w = 0; w < kWorkers; ++w) {
    o.ok &= failed[static_cast<std::size_t>(w)] == 0;
    o.ok &= std::memcmp(models[static_cast<std::size_t>(w)].params().data(),
                        models[0].params().data(), Mlp::kNumParams * sizeof(float)) == 0;
  }
  o.test_accuracy = models[0].evaluate(digits().test).accuracy;
  o.train_loss = models[0].evaluate(train_set).mean_loss;
  return o;
}

struct Row {
  std::string label;
  std::string spec;
  bool control = false;  // must fail the gate on non-IID shards
};

const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      {"uncompressed (float32)", "float32"},
      {"fp16", "float16"},
      {"bf16", "bfloat16"},
      {"qint8 + EF", "qint8:bucket=512"},
      {"qint4 + EF", "qint4:bucket=512"},
      // DGC warm-up: density 25%, 6.25%, 1.56% for one epoch (21 steps) each, then 1%.
      {"top-k 1% + EF (DGC warm-up)", "topk:density=0.01,warmup=21"},
      {"PowerSGD rank 2 + EF", "powersgd:rank=2"},
      // Bucket 8 (6.4x smaller than float32). Coarser buckets give every element of a
      // bucket the same magnitude, and at this recipe's rate IID shards fail the gate from
      // bucket 16 on (95.96% / 0.036 against 97.33% / 0.024); label-sorted pass up to 64.
      {"sign + EF (bucket 8)", "sign:bucket=8"},
      {"control: top-k 1%, no EF", "topk:density=0.01,warmup=21,ef=0", true},
      {"control: sign (bucket 8), no EF", "sign:bucket=8,ef=0", true},
  };
  return r;
}

struct Summary {
  double accuracy = 0;  // mean over seeds, fraction
  double loss = 0;      // mean final training loss over seeds
  bool ok = true;
};

Summary run_seeds(const Row& row, Sharding sharding) {
  Result<CompressionPlan> plan = CompressionPlan::parse(row.spec);
  EXPECT_TRUE(plan.is_ok()) << row.spec << ": " << plan.status().to_string();
  if (!plan.is_ok()) return {0, 0, false};
  Summary s;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    const Outcome o = train(*plan, sharding, static_cast<std::uint64_t>(seed));
    s.accuracy += o.test_accuracy / kSeeds;
    s.loss += o.train_loss / kSeeds;
    s.ok &= o.ok;
  }
  return s;
}

void gate_all(Sharding sharding, const char* name) {
  const auto start = std::chrono::steady_clock::now();
  const Summary base = run_seeds(rows()[0], sharding);
  ASSERT_TRUE(base.ok);
  char line[256];
  std::string table =
      "| codec | shards | mean test acc | final train loss | gate |\n|---|---|---:|---:|---|\n";
  std::snprintf(line, sizeof line, "| %s | %s | %.2f%% | %.4f | baseline |\n",
                rows()[0].label.c_str(), name, base.accuracy * 100, base.loss);
  table += line;
  for (std::size_t i = 1; i < rows().size(); ++i) {
    const Row& row = rows()[i];
    if (row.control && sharding == Sharding::kIid) continue;  // controls are gated on non-IID
    const Summary s = run_seeds(row, sharding);
    const bool acc_ok = s.accuracy >= base.accuracy - 0.01;
    const bool loss_ok = s.loss <= 2 * base.loss;
    const bool pass = acc_ok && loss_ok;
    std::snprintf(line, sizeof line, "| %s | %s | %.2f%% | %.4f | %s%s |\n", row.label.c_str(),
                  name, s.accuracy * 100, s.loss, pass ? "pass" : "FAIL",
                  row.control ? (pass ? " (control should fail!)" : " (control, expected)") : "");
    table += line;
    EXPECT_TRUE(s.ok) << row.label << ": a collective failed or replicas drifted apart";
    if (row.control) {
      EXPECT_FALSE(pass) << row.label << " passed the gate on " << name
                         << " shards: the test cannot see damage";
    } else {
      EXPECT_TRUE(acc_ok) << row.label << ": accuracy " << s.accuracy * 100 << "% vs "
                          << base.accuracy * 100 << "% uncompressed";
      EXPECT_TRUE(loss_ok) << row.label << ": train loss " << s.loss << " vs " << base.loss
                           << " uncompressed";
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n"
            << kWorkers << " workers x batch " << kBatch << ", " << kEpochs << " epochs, " << kSeeds
            << " seeds, " << name << " shards (" << seconds << " s)\n"
            << table << std::endl;
}

TEST(CompressedConvergence, IidShards) { gate_all(Sharding::kIid, "IID"); }
TEST(CompressedConvergence, LabelSortedShards) { gate_all(Sharding::kLabelSorted, "label-sorted"); }

}  // namespace
}  // namespace tributary::compression::collectives
