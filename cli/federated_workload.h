// Federated averaging of the digits MLP through Worker::federated_round: every round each
// member trains its own replica on its shard (local SGD, one pass by default), then the
// members that make the round's deadline average their parameters, weighted by the samples
// each trained on since it last contributed. A member that misses the deadline keeps its
// replica and trains on from it, so its work enters the next round it makes (with the
// samples of both rounds as its weight); every contributor leaves a round holding the same
// bits. A last round waits for everyone, so the run ends with one model on every member.
//
// Lateness is injected for demos and the accuracy benchmark: in each round a share of the
// members, drawn at random from a seed every member shares, sleeps past the deadline
// before it contributes.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/worker.h"

namespace tributary::cli {

struct FederatedSpec {
  int rounds = 40;
  int local_passes = 1;          // passes over the member's shard per round
  std::size_t batch_size = 16;
  float learning_rate = 0.2f;    // at round 0; cosine-decayed to 0 at `rounds`
  float momentum = 0.9f;         // local SGD; the velocity restarts every round
  std::chrono::milliseconds deadline{1000};  // from the round's first contribution
  int min_participants = 1;
  double late_fraction = 0;      // share of the members late in each round (rounded)
  std::chrono::milliseconds late_by{0};  // how long a late member sleeps; 0: 1.5 x deadline
  bool label_sorted = false;
  std::uint64_t seed = 1;
  std::string data_path;         // empty: the project's data/digits.csv.gz
  int print_every = 5;           // rounds between progress lines (rank 0)
};

struct FederatedSummary {
  int rounds = 0;           // rounds run, the final all-members round included
  int contributed = 0;      // rounds this member made
  int late = 0;             // rounds it missed
  int failed = 0;           // rounds below min_participants
  double test_accuracy = 0;
  double seconds = 0;
  // Members in the final round (everyone's): read from its outcome, not from the view
  // afterwards, which shrinks as soon as a member that finished first leaves.
  int world_size = 0;
  int rank = -1;
  std::string params_sha256;  // of the final parameters: equal on every member
};

// The ranks late in `round` among `world` members: a seeded shuffle of the ranks, the first
// round(late_fraction x world) of it. Every member computes the same set.
std::vector<bool> late_ranks(std::uint64_t seed, std::uint64_t round, int world,
                             double late_fraction);

// Runs the rounds on a Worker from `start_worker`, then leaves.
Result<FederatedSummary> run_federated(
    const std::function<Result<std::unique_ptr<agent::Worker>>()>& start_worker,
    const FederatedSpec& spec, std::FILE* out);

}  // namespace tributary::cli
