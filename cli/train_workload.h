// Data-parallel training of the digits MLP through a Worker: every step each rank computes
// gradients on its shard, the gradients (and the loss, in the same buffer) are averaged
// with one all-reduce, and every rank applies the same SGD step, so all replicas stay
// bit-identical.
#pragma once

#include <cstdio>
#include <string>

#include "agent/worker.h"

namespace tributary {

struct TrainSpec {
  int epochs = 30;                // passes over the training shards
  std::size_t batch_size = 16;    // per worker
  float learning_rate = 0.1f;
  float momentum = 0.9f;
  bool label_sorted = false;      // non-IID shards (sorted by label) instead of IID
  std::uint64_t seed = 1;
  std::string data_path;          // empty: the project's data/digits.csv.gz
  int print_every = 25;           // steps between progress lines (rank 0)
};

struct TrainSummary {
  long steps = 0;
  double final_loss = 0;
  double test_accuracy = 0;
  double seconds = 0;
  double mean_allreduce_us = 0;
  int world_size = 0;
  std::uint64_t epoch = 0;
};

Result<TrainSummary> run_training(Worker& worker, const TrainSpec& spec, std::FILE* out);

}  // namespace tributary
