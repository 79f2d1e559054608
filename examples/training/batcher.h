// Deterministic minibatches over one worker's shard.
//
// The order of an epoch is a seeded shuffle of the shard that depends only on (seed,
// epoch, worker), so a restarted or re-joining worker recomputes exactly the batches it
// would have seen, with no state to transfer beyond the epoch number and step.
//
// Only full batches are produced: the shuffled tail of shard % batch_size rows sits out
// that epoch (a different tail each epoch). Lock-step data-parallel workers must all take
// the same number of steps per epoch; shards differ by at most one row, but their full
// batch counts can still differ by one, so such a job runs common_batches_per_epoch().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tributary::training {

class Batcher {
 public:
  // `shard`: the dataset rows this worker owns (e.g. from shard_indices). batch_size >= 1
  // and at most shard.size() (checked). Starts at epoch 0.
  Batcher(std::vector<std::size_t> shard, std::size_t batch_size, std::uint64_t seed,
          std::uint64_t worker);

  // Reorders the shard for `epoch`; any epoch can be entered in any order.
  void start_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const { return epoch_; }

  std::size_t batches_per_epoch() const { return order_.size() / batch_size_; }
  std::size_t batch_size() const { return batch_size_; }
  // Dataset row indices of batch `b` (< batches_per_epoch()) of the current epoch; valid
  // until the next start_epoch().
  std::span<const std::size_t> batch(std::size_t b) const;

  // Full batches per epoch that every shard of a job can supply: the lock-step count.
  static std::size_t common_batches_per_epoch(std::span<const std::vector<std::size_t>> shards,
                                              std::size_t batch_size);

 private:
  std::vector<std::size_t> shard_;
  std::vector<std::size_t> order_;
  std::size_t batch_size_;
  std::uint64_t seed_;
  std::uint64_t worker_;
  std::uint64_t epoch_ = 0;
};

}  // namespace tributary::training
