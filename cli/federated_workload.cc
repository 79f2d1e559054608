#include "cli/federated_workload.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <thread>

#include "core/hash.h"
#include "examples/training/batcher.h"
#include "examples/training/dataset.h"
#include "examples/training/mlp.h"
#include "examples/training/rng.h"
#include "examples/training/sgd.h"

namespace tributary::cli {

using namespace training;

std::vector<bool> late_ranks(std::uint64_t seed, std::uint64_t round, int world,
                             double late_fraction) {
  std::vector<int> order(static_cast<std::size_t>(world));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(mix_seed(seed, round, 0x6c617465));  // "late"
  for (std::size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[rng.below(i)]);
  }
  const auto k = static_cast<std::size_t>(
      std::clamp(std::lround(late_fraction * world), 0L, static_cast<long>(world)));
  std::vector<bool> late(order.size(), false);
  for (std::size_t i = 0; i < k; ++i) late[static_cast<std::size_t>(order[i])] = true;
  return late;
}

namespace {

float cosine_rate(const FederatedSpec& spec, int round) {
  const double t = static_cast<double>(round) / std::max(1, spec.rounds);
  return static_cast<float>(0.5 * spec.learning_rate * (1.0 + std::cos(std::numbers::pi * t)));
}

}  // namespace

Result<FederatedSummary> run_federated(
    const std::function<Result<std::unique_ptr<agent::Worker>>()>& start_worker,
    const FederatedSpec& spec, std::FILE* out) {
  if (spec.rounds < 1 || spec.local_passes < 1 || spec.batch_size < 1 ||
      spec.deadline.count() <= 0 || spec.late_fraction < 0 || spec.late_fraction > 1) {
    return error(StatusCode::kInvalidArgument,
                 "federated: rounds, passes, batch and deadline must be positive and the late "
                 "fraction within [0, 1]");
  }
  const std::string path = spec.data_path.empty() ? default_digits_path() : spec.data_path;
  TRIB_ASSIGN_OR_RETURN(const Dataset all, load_digits(path));
  TRIB_ASSIGN_OR_RETURN(const TrainTestSplit split, split_train_test(all));
  const auto start = std::chrono::steady_clock::now();

  TRIB_ASSIGN_OR_RETURN(std::unique_ptr<agent::Worker> worker, start_worker());
  agent::Worker& w = *worker;
  const int world = w.size();
  const int rank = w.rank();
  // Shards of the first view: a member's data is its own for the whole run (a federated
  // site does not receive another's rows when the membership changes).
  const auto shards =
      shard_indices(split.train, static_cast<std::size_t>(world),
                    spec.label_sorted ? Sharding::kLabelSorted : Sharding::kIid, spec.seed);
  const auto& shard = shards[static_cast<std::size_t>(rank)];
  if (shard.size() < spec.batch_size) {
    return error(StatusCode::kInvalidArgument,
                 "federated: " + std::to_string(shard.size()) + " rows per member at " +
                     std::to_string(world) + " members, fewer than one batch of " +
                     std::to_string(spec.batch_size));
  }
  Batcher batcher(shard, spec.batch_size, spec.seed, static_cast<std::uint64_t>(rank));
  Mlp model(spec.seed);  // the same initial parameters on every member
  const std::chrono::milliseconds late_by =
      spec.late_by.count() > 0 ? spec.late_by : spec.deadline * 3 / 2;

  if (rank == 0) {
    std::fprintf(out,
                 "federated averaging of the 64-64-10 MLP: %d members, %zu rows each (%s), %d "
                 "rounds of %d local pass(es), deadline %lld ms, %.0f%% of members late per "
                 "round\n",
                 world, shard.size(), spec.label_sorted ? "label-sorted" : "IID", spec.rounds,
                 spec.local_passes, static_cast<long long>(spec.deadline.count()),
                 100.0 * spec.late_fraction);
    std::fprintf(out, "%6s %12s %12s %9s %9s\n", "round", "contributors", "weight", "test_acc",
                 "late_here");
    std::fflush(out);
  }

  FederatedSummary summary;
  double samples = 0;  // trained since this member last contributed: its weight
  // The final round's weight of a member with nothing new: its share of the last round it
  // made (that round's total over its contributors), so the replicas that already hold the
  // average count for what it was averaged from, and a late member's extra pass for itself.
  double share = 1;
  std::uint64_t pass = 0;
  // `final_round`: nobody is made late, the deadline is long and everyone must contribute.
  auto run_round = [&](int round, bool final_round) -> Status {
    if (!final_round) {
      Sgd sgd(model.params().size(), {cosine_rate(spec, round), spec.momentum, 0.0f});
      for (int p = 0; p < spec.local_passes; ++p) {
        batcher.start_epoch(pass++);
        for (std::size_t b = 0; b < batcher.batches_per_epoch(); ++b) {
          model.forward_backward(split.train, batcher.batch(b));
          sgd.step(model.params(), model.grads());
          samples += static_cast<double>(spec.batch_size);
        }
      }
      if (late_ranks(spec.seed, static_cast<std::uint64_t>(round), world,
                     spec.late_fraction)[static_cast<std::size_t>(rank)]) {
        std::this_thread::sleep_for(late_by);
      }
    }
    agent::FederatedRound r;
    r.round = static_cast<std::uint64_t>(round) + 1;  // as the table counts them
    r.weight = samples > 0 ? samples : share;
    r.deadline = final_round ? std::max<std::chrono::milliseconds>(std::chrono::seconds(60),
                                                                    late_by + spec.deadline * 4)
                             : spec.deadline;
    r.min_participants = final_round ? world : spec.min_participants;
    // The replica is what is averaged, so a late member's work is still in it next round:
    // nothing to fold.
    r.late = agent::LatePolicy::kDrop;
    r.tensor_id = 1;
    ++summary.rounds;
    Result<agent::FederatedOutcome> outcome =
        w.federated_round(model.params().data(), model.params().size(), r);
    if (!outcome) {
      if (outcome.status().code() != StatusCode::kRoundFailed || final_round) {
        return outcome.status();
      }
      ++summary.failed;
      if (rank == 0) {
        std::fprintf(out, "%6d failed: %s\n", round + 1, outcome.status().message().c_str());
        std::fflush(out);
      }
      return Status::ok();
    }
    if (final_round) summary.world_size = static_cast<int>(outcome->contributors.size());
    if (outcome->contributed) {
      ++summary.contributed;
      samples = 0;
      share = std::max(1.0, outcome->total_weight /
                                static_cast<double>(std::max<std::size_t>(
                                    1, outcome->contributors.size())));
    } else {
      ++summary.late;
    }
    if (rank == 0 && (final_round || (round + 1) % spec.print_every == 0)) {
      std::fprintf(out, "%6s %12zu %12.0f %8.2f%% %9s\n",
                   final_round ? "final" : std::to_string(round + 1).c_str(),
                   outcome->contributors.size(), outcome->total_weight,
                   100.0 * model.evaluate(split.test).accuracy,
                   outcome->contributed ? "no" : "yes");
      std::fflush(out);
    }
    return Status::ok();
  };
  for (int round = 0; round < spec.rounds; ++round) {
    TRIB_RETURN_IF_ERROR(run_round(round, false));
  }
  TRIB_RETURN_IF_ERROR(run_round(spec.rounds, true));

  summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.test_accuracy = model.evaluate(split.test).accuracy;
  summary.rank = w.rank();
  summary.params_sha256 = to_hex(Sha256::of(std::as_bytes(model.params())));
  TRIB_RETURN_IF_ERROR(w.leave());
  return summary;
}

}  // namespace tributary::cli
