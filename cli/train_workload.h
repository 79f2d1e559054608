// Data-parallel training of the digits MLP through a Worker: every step each rank computes
// gradients on its shard, the gradients (and the loss, in the same buffer) are averaged
// with one all-reduce, and every rank applies the same SGD step, so all replicas stay
// bit-identical. The loop is elastic (agent/elastic_loop.h): a step boundary before each
// step, the data re-sharded when the world changes, a drain on SIGTERM, a rejoin after an
// eviction.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "agent/worker.h"
#include "examples/training/recipe.h"

namespace tributary::cli {

struct TrainSpec {
  // Epochs, batch, rate schedule, momentum and clipping: the recipe that
  // tests/compression/compressed_convergence_test.cc proves for every codec.
  training::Recipe recipe;
  training::GradientCodec codec;  // how WorkerConfig::codec meets the recipe
  std::string codec_warning;      // printed with the header: the codec is known to lose accuracy
  bool label_sorted = false;      // non-IID shards (sorted by label) instead of IID
  std::uint64_t seed = 1;
  std::string data_path;  // empty: the project's data/digits.csv.gz
  int print_every = 25;   // steps between progress lines (rank 0)
  int step_delay_ms = 0;  // extra compute per step (makes demos watchable)
  int slow_ms = 0;        // this worker is a straggler: extra delay per step
  // Fault injection into this very process (real signals), at a global step:
  long kill_at = -1;            // raise(SIGKILL)
  long stop_at = -1;            // raise(SIGSTOP): someone else must SIGCONT it
  long rejoin_after_ms = 1500;  // after an eviction (or a refused rejoin), wait before joining
  bool compressed = false;      // gradients through Worker::all_reduce_compressed
  // Machine-readable progress (cli/demo_events.h) for the demo's controller instead of the
  // human table: every worker reports every step, rank 0 its evaluations.
  bool events = false;
};

struct TrainSummary {
  long steps = 0;
  double final_loss = 0;
  double test_accuracy = 0;
  double seconds = 0;
  double mean_allreduce_us = 0;
  int world_size = 0;
  int rank = -1;  // this worker's rank at the end
  std::uint64_t epoch = 0;
  int recoveries = 0;  // collectives that needed more than one attempt
  bool drained = false;
  std::string params_sha256;  // of the final parameters: equal on every survivor
  double wire_ratio = 1.0;    // raw gradient bytes / bytes this worker put on the wire
};

// `start_worker` creates (and re-creates, after an eviction) the Worker.
Result<TrainSummary> run_training(
    const std::function<Result<std::unique_ptr<agent::Worker>>()>& start_worker,
    const TrainSpec& spec, std::FILE* out);

}  // namespace tributary::cli
