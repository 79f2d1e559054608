// The training recipe (examples/training/recipe.h) run in one process: N workers as
// threads over the in-memory fabric, each step's gradient averaged by
// compressed_all_reduce, every call around it the one cli/train_workload.cc makes. The
// convergence test gates codecs with it; the demo test checks that `tributary demo`
// (processes, TCP) ends with the very same parameters.
#pragma once

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/memory_link.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "core/hash.h"
#include "examples/training/batcher.h"
#include "examples/training/dataset.h"
#include "examples/training/mlp.h"
#include "examples/training/recipe.h"

namespace tributary::testing {

inline const training::TrainTestSplit& digits() {
  static const training::TrainTestSplit split = [] {
    Result<training::Dataset> all = training::load_digits();
    EXPECT_TRUE(all.is_ok()) << all.status().to_string();
    Result<training::TrainTestSplit> s =
        training::split_train_test(all.is_ok() ? *all : training::Dataset{});
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(s).value() : training::TrainTestSplit{};
  }();
  return split;
}

struct RecipeRun {
  double test_accuracy = 0;
  double train_loss = 0;
  bool ok = true;             // every collective succeeded and the replicas stayed identical
  std::string params_sha256;  // of worker 0's final parameters, as the demo prints it
};

// How a plan meets the recipe (cli/main.cc computes the same from --codec).
inline training::GradientCodec gradient_codec(
    const compression::collectives::CompressionPlan& plan) {
  return {.applies_momentum = plan.codec && plan.codec->wants_momentum(),
          .sparse = plan.kind == compression::collectives::CompressionPlan::Kind::kSparse};
}

// `codec_seed` is WorkerConfig::codec_seed (the demo's default is 1).
inline RecipeRun train_recipe(const compression::collectives::CompressionPlan& plan,
                              training::Sharding sharding, std::uint64_t seed,
                              const training::Recipe& recipe = {}, int workers = 4,
                              std::uint64_t codec_seed = 1) {
  using namespace compression;
  using namespace compression::collectives;
  using training::Mlp;
  const training::GradientCodec codec = gradient_codec(plan);
  const training::Dataset& train_set = digits().train;
  const auto uworkers = static_cast<std::size_t>(workers);
  const auto shards = training::shard_indices(train_set, uworkers, sharding, seed);
  const std::size_t steps = training::Batcher::common_batches_per_epoch(shards, recipe.batch_size);
  std::vector<MatrixShape> shapes;
  for (const training::Tensor& t : Mlp::weight_matrices())
    shapes.push_back({t.offset, t.rows, t.cols});
  algorithms::MemoryFabric fabric(workers);
  std::vector<Mlp> models(uworkers, Mlp(seed));
  std::vector<int> failed(uworkers, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      const auto uw = static_cast<std::size_t>(w);
      Mlp& model = models[uw];
      training::Sgd sgd = training::make_optimizer(recipe, codec, Mlp::kNumParams);
      training::Batcher batcher(shards[uw], recipe.batch_size, seed, uw);
      CompressionState state;
      std::vector<float> grad(Mlp::kNumParams);
      std::uint64_t step = 0;
      for (int epoch = 0; epoch < recipe.epochs && !failed[uw]; ++epoch) {
        batcher.start_epoch(static_cast<std::uint64_t>(epoch));
        for (std::size_t b = 0; b < steps; ++b, ++step) {
          model.forward_backward(train_set, batcher.batch(b));
          std::memcpy(grad.data(), model.grads().data(), grad.size() * sizeof(float));
          training::clip_local_gradient(recipe, codec, grad, workers);
          CompressionContext ctx;
          ctx.plan = &plan;
          ctx.state = &state;
          ctx.tensor_id = 1;
          ctx.step = step;
          ctx.seed = codec_seed;
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
          training::apply_update(recipe, sgd, model.params(), grad,
                                 epoch + static_cast<double>(b) / static_cast<double>(steps));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  RecipeRun run;
  for (std::size_t w = 0; w < uworkers; ++w) {
    run.ok &= failed[w] == 0;
    run.ok &= std::memcmp(models[w].params().data(), models[0].params().data(),
                          Mlp::kNumParams * sizeof(float)) == 0;
  }
  run.test_accuracy = models[0].evaluate(digits().test).accuracy;
  run.train_loss = models[0].evaluate(train_set).mean_loss;
  run.params_sha256 = to_hex(Sha256::of(std::as_bytes(models[0].params())));
  return run;
}

}  // namespace tributary::testing
