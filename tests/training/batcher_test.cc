#include "examples/training/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace tributary::training {
namespace {

std::vector<std::size_t> shard_of(std::size_t n, std::size_t first) {
  std::vector<std::size_t> s(n);
  std::iota(s.begin(), s.end(), first);
  return s;
}

std::vector<std::size_t> epoch_rows(const Batcher& b) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < b.batches_per_epoch(); ++i) {
    const auto batch = b.batch(i);
    rows.insert(rows.end(), batch.begin(), batch.end());
  }
  return rows;
}

TEST(Batcher, FullBatchesOfDistinctShardRows) {
  const auto shard = shard_of(337, 1000);
  Batcher b(shard, 16, 5, 2);
  EXPECT_EQ(b.batches_per_epoch(), 21u);  // 337 = 21 * 16 + 1 left out this epoch
  const auto rows = epoch_rows(b);
  ASSERT_EQ(rows.size(), 336u);
  const std::set<std::size_t> distinct(rows.begin(), rows.end());
  EXPECT_EQ(distinct.size(), rows.size());
  for (std::size_t r : rows) EXPECT_TRUE(r >= 1000 && r < 1337) << r;
}

TEST(Batcher, OrderDependsOnlyOnSeedEpochAndWorker) {
  const auto shard = shard_of(100, 0);
  Batcher a(shard, 10, 1, 0), again(shard, 10, 1, 0);
  a.start_epoch(3);
  again.start_epoch(7);
  again.start_epoch(3);  // epochs can be entered in any order
  EXPECT_EQ(epoch_rows(a), epoch_rows(again));

  const auto epoch3 = epoch_rows(a);
  a.start_epoch(4);
  EXPECT_NE(epoch_rows(a), epoch3) << "epochs should reshuffle";

  Batcher other_worker(shard, 10, 1, 1), other_seed(shard, 10, 2, 0);
  other_worker.start_epoch(3);
  other_seed.start_epoch(3);
  EXPECT_NE(epoch_rows(other_worker), epoch3);
  EXPECT_NE(epoch_rows(other_seed), epoch3);
  // Every epoch with an exact multiple covers the whole shard.
  auto sorted = epoch3;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, shard);
}

TEST(Batcher, CommonBatchCountIsTheSmallestShards) {
  const std::vector<std::vector<std::size_t>> shards{shard_of(32, 0), shard_of(31, 32),
                                                     shard_of(32, 63)};
  EXPECT_EQ(Batcher::common_batches_per_epoch(shards, 16), 1u);
  EXPECT_EQ(Batcher::common_batches_per_epoch(shards, 8), 3u);
}

}  // namespace
}  // namespace tributary::training
