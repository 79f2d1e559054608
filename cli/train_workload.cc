#include "cli/train_workload.h"

#include <chrono>
#include <vector>

#include "examples/training/batcher.h"
#include "examples/training/dataset.h"
#include "examples/training/mlp.h"
#include "examples/training/sgd.h"

namespace tributary {

using namespace training;

Result<TrainSummary> run_training(Worker& w, const TrainSpec& spec, std::FILE* out) {
  const std::string path = spec.data_path.empty() ? default_digits_path() : spec.data_path;
  auto all = load_digits(path);
  if (!all) return all.status();
  auto split = split_train_test(*all);
  if (!split) return split.status();
  const Dataset& train = split->train;
  const Dataset& test = split->test;

  const int n = w.size();
  const auto shards = shard_indices(train, static_cast<std::size_t>(n),
                                    spec.label_sorted ? Sharding::kLabelSorted : Sharding::kIid,
                                    spec.seed);
  Mlp model(spec.seed);
  Sgd sgd(model.params().size(), SgdOptions{spec.learning_rate, spec.momentum, 0.0f});
  Batcher batcher(shards[static_cast<std::size_t>(w.rank())], spec.batch_size, spec.seed,
                  static_cast<std::uint64_t>(w.rank()));
  const std::size_t steps_per_epoch = Batcher::common_batches_per_epoch(shards, spec.batch_size);

  // Gradients plus the loss in one buffer: one all-reduce per step.
  const std::size_t np = model.grads().size();
  std::vector<float> buffer(np + 1);
  const bool talk = w.rank() == 0;
  if (talk) {
    std::fprintf(out,
                 "training 64-64-10 MLP on %zu digits (%s shards), %d workers, batch %zu each, "
                 "%zu steps/epoch\n",
                 train.size(), spec.label_sorted ? "label-sorted" : "IID", n, spec.batch_size,
                 steps_per_epoch);
    std::fprintf(out, "%6s %5s %9s %9s %6s %6s %12s\n", "step", "epoch", "loss", "test_acc",
                 "world", "view", "busbw(GB/s)");
    std::fflush(out);
  }
  TrainSummary summary;
  const auto start = std::chrono::steady_clock::now();
  double allreduce_seconds = 0;
  double window_seconds = 0;
  int window_steps = 0;
  double last_accuracy = 0;
  for (int epoch = 0; epoch < spec.epochs; ++epoch) {
    batcher.start_epoch(static_cast<std::uint64_t>(epoch));
    for (std::size_t b = 0; b < steps_per_epoch; ++b) {
      const float loss = model.forward_backward(train, batcher.batch(b));
      std::copy(model.grads().begin(), model.grads().end(), buffer.begin());
      buffer[np] = loss;
      const auto t0 = std::chrono::steady_clock::now();
      auto outcome = w.all_reduce(buffer.data(), buffer.data(), buffer.size(), DType::kFloat32,
                                  ReduceOp::kAvg);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!outcome) return outcome.status();
      allreduce_seconds += dt;
      window_seconds += dt;
      ++window_steps;
      sgd.step(model.params(), std::span<const float>(buffer.data(), np));
      ++summary.steps;
      summary.final_loss = buffer[np];
      summary.epoch = outcome->epoch;
      const bool last = epoch + 1 == spec.epochs && b + 1 == steps_per_epoch;
      if (talk && (summary.steps % spec.print_every == 0 || last)) {
        last_accuracy = model.evaluate(test).accuracy;  // 450 samples: cheap next to a step
        const double bytes = static_cast<double>(buffer.size() * sizeof(float));
        const double busbw = window_seconds > 0 ? bytes * window_steps / window_seconds / 1e9 *
                                                      2.0 * (n - 1) / std::max(1, n)
                                                : 0.0;
        std::fprintf(out, "%6ld %5d %9.4f %8.2f%% %6d %6llu %12.3f\n", summary.steps, epoch,
                     summary.final_loss, 100.0 * last_accuracy, outcome->contributors,
                     static_cast<unsigned long long>(outcome->epoch), busbw);
        std::fflush(out);
        window_seconds = 0;
        window_steps = 0;
      }
    }
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.test_accuracy = model.evaluate(test).accuracy;
  summary.mean_allreduce_us = summary.steps ? allreduce_seconds / summary.steps * 1e6 : 0;
  summary.world_size = n;
  return summary;
}

}  // namespace tributary
