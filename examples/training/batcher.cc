#include "examples/training/batcher.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "examples/training/rng.h"

namespace tributary::training {

Batcher::Batcher(std::vector<std::size_t> shard, std::size_t batch_size, std::uint64_t seed,
                 std::uint64_t worker)
    : shard_(std::move(shard)), batch_size_(batch_size), seed_(seed), worker_(worker) {
  TRIB_CHECK(batch_size_ >= 1 && batch_size_ <= shard_.size())
      << "batch size " << batch_size_ << " for a shard of " << shard_.size();
  start_epoch(0);
}

void Batcher::start_epoch(std::uint64_t epoch) {
  epoch_ = epoch;
  // Shuffle a fresh copy of the shard, not last epoch's order, so an epoch's order does
  // not depend on which epochs came before it.
  order_ = shard_;
  Rng(mix_seed(seed_, epoch, worker_)).shuffle(std::span(order_));
}

std::span<const std::size_t> Batcher::batch(std::size_t b) const {
  TRIB_CHECK(b < batches_per_epoch()) << "batch " << b << " of " << batches_per_epoch();
  return std::span(order_).subspan(b * batch_size_, batch_size_);
}

std::size_t Batcher::common_batches_per_epoch(std::span<const std::vector<std::size_t>> shards,
                                              std::size_t batch_size) {
  TRIB_CHECK(!shards.empty() && batch_size >= 1);
  std::size_t smallest = shards.front().size();
  for (const auto& s : shards) smallest = std::min(smallest, s.size());
  return smallest / batch_size;
}

}  // namespace tributary::training
