#include "cli/train_workload.h"

#include <signal.h>

#include <chrono>
#include <thread>
#include <vector>

#include "agent/drain_on_sigterm.h"
#include "agent/elastic_loop.h"
#include "cli/demo_events.h"
#include "core/hash.h"
#include "examples/training/batcher.h"
#include "examples/training/dataset.h"
#include "examples/training/mlp.h"
#include "examples/training/sgd.h"

namespace tributary::cli {

using namespace training;

namespace {

// Where training is: part of the registered state, so a joiner resumes at the same place.
struct Progress {
  std::int64_t step = 0;        // global steps committed
  std::int64_t data_epoch = 0;  // passes over the data
  std::int64_t batch = 0;       // next batch within the pass
};

}  // namespace

Result<TrainSummary> run_training(
    const std::function<Result<std::unique_ptr<agent::Worker>>()>& start_worker,
    const TrainSpec& spec, std::FILE* out) {
  const std::string path = spec.data_path.empty() ? default_digits_path() : spec.data_path;
  TRIB_ASSIGN_OR_RETURN(const Dataset all, load_digits(path));
  TRIB_ASSIGN_OR_RETURN(const TrainTestSplit split, split_train_test(all));
  const Dataset& train = split.train;
  const Dataset& test = split.test;

  Mlp model(spec.seed);
  Sgd sgd = make_optimizer(spec.recipe, spec.codec, model.params().size());
  Progress progress;
  const std::size_t np = model.grads().size();
  std::vector<float> buffer(np + 1);          // gradients + loss: one all-reduce per step
  std::vector<agent::TensorMatrix> matrices;  // for PowerSGD
  for (const Tensor& t : Mlp::weight_matrices()) matrices.push_back({t.offset, t.rows, t.cols});
  double raw_bytes = 0;
  double wire_bytes = 0;

  TrainSummary summary;
  const auto start = std::chrono::steady_clock::now();
  double allreduce_seconds = 0;
  double window_seconds = 0;
  int window_steps = 0;
  bool header_printed = false;

  int shard_world = -1;
  int shard_rank = -1;
  std::unique_ptr<Batcher> batcher;
  std::size_t steps_per_epoch = 0;
  // Ends the pass over the data once `steps_per_epoch` steps of it are done; true when that
  // was the last pass.
  auto end_of_training = [&] {
    if (steps_per_epoch == 0 || static_cast<std::size_t>(progress.batch) < steps_per_epoch) {
      return false;
    }
    progress.batch = 0;
    ++progress.data_epoch;
    if (progress.data_epoch >= spec.recipe.epochs) return true;
    batcher->start_epoch(static_cast<std::uint64_t>(progress.data_epoch));
    return false;
  };

  agent::ElasticWorkload workload;
  workload.start_worker = start_worker;
  workload.position = [&] { return progress.step; };
  workload.register_state = [&](agent::Worker& w) {
    // A (re)joiner's last world is not the one its state comes from: no epoch end is
    // judged by it, and the shards are recomputed.
    steps_per_epoch = 0;
    shard_world = -1;
    w.register_state("params", std::as_writable_bytes(model.params()));
    w.register_state("momentum", std::as_writable_bytes(sgd.momentum()));
    w.register_state("progress", std::as_writable_bytes(std::span(&progress, 1)));
  };
  auto emit = [&](const DemoEvent& event) {
    std::fprintf(out, "%s\n", encode_event(event).c_str());
    std::fflush(out);
  };
  const bool table = !spec.events;  // the human table, or events for the demo's controller
  workload.step = [&](agent::Worker& w,
                      const agent::BoundaryOutcome& boundary) -> Result<agent::StepResult> {
    if (spec.events && boundary.received_state) {
      emit(StateEvent{static_cast<long>(progress.step), boundary.state_bytes,
                      boundary.state_source_rank, boundary.state_sha256});
    }
    if (progress.data_epoch >= spec.recipe.epochs) return agent::StepResult::kFinished;
    // An epoch ends with the step that completes it in the world that ran it: a view that
    // changed at this boundary (members that finished leaving, say) must not stretch it.
    if (end_of_training()) return agent::StepResult::kFinished;

    // Shards follow the world: recomputed whenever the view's size or our rank changes.
    const int n = w.size();
    if (n != shard_world || w.rank() != shard_rank) {
      const auto shards =
          shard_indices(train, static_cast<std::size_t>(n),
                        spec.label_sorted ? Sharding::kLabelSorted : Sharding::kIid, spec.seed);
      batcher = std::make_unique<Batcher>(shards[static_cast<std::size_t>(w.rank())],
                                          spec.recipe.batch_size, spec.seed,
                                          static_cast<std::uint64_t>(w.rank()));
      steps_per_epoch = Batcher::common_batches_per_epoch(shards, spec.recipe.batch_size);
      batcher->start_epoch(static_cast<std::uint64_t>(progress.data_epoch));
      shard_world = n;
      shard_rank = w.rank();
      if (table && w.rank() == 0 && header_printed) {
        std::fprintf(out, "-- world is now %d workers (view %llu), %zu steps/epoch\n", n,
                     static_cast<unsigned long long>(w.epoch()), steps_per_epoch);
      }
    }
    if (w.rank() == 0 && !header_printed) {
      if (table) {
        std::fprintf(out,
                     "training 64-64-10 MLP on %zu digits (%s shards), %d workers, batch %zu "
                     "each, %zu steps/epoch\n",
                     train.size(), spec.label_sorted ? "label-sorted" : "IID", n,
                     spec.recipe.batch_size, steps_per_epoch);
      }
      if (!spec.codec_warning.empty()) {
        std::fprintf(out, "warning: %s\n", spec.codec_warning.c_str());
      }
      if (table) {
        std::fprintf(out, "%6s %5s %9s %9s %6s %6s %12s\n", "step", "epoch", "loss", "test_acc",
                     "world", "view", "busbw(GB/s)");
      }
      std::fflush(out);
      header_printed = true;
    }
    // A grown world has fewer steps per epoch: one it already completed ends here.
    if (end_of_training()) return agent::StepResult::kFinished;

    // Each injected fault fires once per process (a rejoiner resumes at an older step).
    static bool injected = false;
    if (!injected && (progress.step == spec.kill_at || progress.step == spec.stop_at)) {
      injected = true;
      const bool kill = progress.step == spec.kill_at;
      if (spec.events) {
        emit(FaultEvent{kill ? "kill" : "stop", static_cast<long>(progress.step),
                        std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()});
      }
      ::raise(kill ? SIGKILL : SIGSTOP);
    }
    if (spec.step_delay_ms + spec.slow_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(spec.step_delay_ms + spec.slow_ms));
    }
    const float loss =
        model.forward_backward(train, batcher->batch(static_cast<std::size_t>(progress.batch)));
    std::copy(model.grads().begin(), model.grads().end(), buffer.begin());
    clip_local_gradient(spec.recipe, spec.codec, std::span<float>(buffer.data(), np), n);
    buffer[np] = loss;
    const auto t0 = std::chrono::steady_clock::now();
    Result<agent::Outcome> outcome = error(StatusCode::kInternal, "not run");
    if (spec.compressed) {
      // The gradient through the codec; the loss (a statistic, never compressed) apart.
      std::uint64_t wire = 0;
      outcome = w.all_reduce_compressed(buffer.data(), np, ReduceOp::kAvg, /*tensor_id=*/1,
                                        static_cast<std::uint64_t>(progress.step), matrices, &wire);
      if (outcome) {
        outcome = w.all_reduce(&buffer[np], &buffer[np], 1, DType::kFloat32, ReduceOp::kAvg);
        raw_bytes += static_cast<double>(np * sizeof(float));
        wire_bytes += static_cast<double>(wire);
      }
    } else {
      outcome = w.all_reduce(buffer.data(), buffer.data(), buffer.size(), DType::kFloat32,
                             ReduceOp::kAvg);
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!outcome) return outcome.status();  // kEvicted: the next boundary notices, and rejoins
    if (outcome->attempts > 1) ++summary.recoveries;
    allreduce_seconds += dt;
    window_seconds += dt;
    ++window_steps;
    // The rate for the point of training this batch belongs to (fractional epochs, so a
    // world that changes size keeps the recipe's curve).
    apply_update(spec.recipe, sgd, model.params(), std::span<const float>(buffer.data(), np),
                 static_cast<double>(progress.data_epoch) +
                     static_cast<double>(progress.batch) / static_cast<double>(steps_per_epoch));
    ++progress.step;
    ++progress.batch;
    ++summary.steps;
    summary.final_loss = buffer[np];
    summary.epoch = outcome->epoch;
    if (spec.events) {
      emit(StepEvent{static_cast<long>(progress.step), static_cast<long>(progress.data_epoch),
                     outcome->epoch, outcome->contributors, w.rank(), summary.final_loss,
                     mono_us_now()});
      if (w.rank() == 0 && progress.step % spec.print_every == 0) {
        emit(EvalEvent{static_cast<long>(progress.step), model.evaluate(test).accuracy});
      }
    } else if (w.rank() == 0 && progress.step % spec.print_every == 0) {
      const double accuracy = model.evaluate(test).accuracy;  // 450 samples: cheap next to a step
      const double bytes = static_cast<double>(buffer.size() * sizeof(float));
      const double busbw = window_seconds > 0 ? bytes * window_steps / window_seconds / 1e9 * 2.0 *
                                                    (n - 1) / std::max(1, n)
                                              : 0.0;
      std::fprintf(out, "%6lld %5lld %9.4f %8.2f%% %6d %6llu %12.3f\n",
                   static_cast<long long>(progress.step),
                   static_cast<long long>(progress.data_epoch), summary.final_loss,
                   100.0 * accuracy, outcome->contributors,
                   static_cast<unsigned long long>(outcome->epoch), busbw);
      std::fflush(out);
      window_seconds = 0;
      window_steps = 0;
    }
    return agent::StepResult::kContinue;
  };

  const auto rejoin_after = std::chrono::milliseconds(spec.rejoin_after_ms);
  agent::ElasticLoop loop({.rejoin_delay = rejoin_after, .retry_delay = rejoin_after},
                          Logger("train"));
  // SIGTERM drains from the start, also while the first join is still under way.
  const agent::DrainOnSigterm drain_on_sigterm(loop);
  TRIB_ASSIGN_OR_RETURN(const agent::ElasticReport report, loop.run(workload));
  summary.drained = report.drained;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.test_accuracy = model.evaluate(test).accuracy;
  summary.mean_allreduce_us = summary.steps ? allreduce_seconds / summary.steps * 1e6 : 0;
  summary.world_size = report.world_size;
  summary.rank = report.rank;
  summary.steps = progress.step;
  summary.params_sha256 = to_hex(Sha256::of(std::as_bytes(model.params())));
  if (wire_bytes > 0) summary.wire_ratio = raw_bytes / wire_bytes;
  return summary;
}

}  // namespace tributary::cli
