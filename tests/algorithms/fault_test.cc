// Failures during an all-reduce: a killed peer, a frozen peer, ranks that disagree on
// the call. Nothing may hang, and no rank may report success with a partial result.
//
// "The caller abandons the link" is played by the harness: a rank whose collective
// fails is killed in the fabric, as closing its sockets would do on TCP, so its peers
// learn of the failure (kPeerLost) instead of waiting for their deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "test_values.h"
#include "tests/support/dying_link.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;
using testing::DyingLink;

constexpr algorithms::AllReduceAlgorithm kAlgorithms[] = {
    algorithms::AllReduceAlgorithm::kRing, algorithms::AllReduceAlgorithm::kTree,
    algorithms::AllReduceAlgorithm::kDoubleTree, algorithms::AllReduceAlgorithm::kHalvingDoubling,
    algorithms::AllReduceAlgorithm::kDirect};

std::string name_of(const ::testing::TestParamInfo<algorithms::AllReduceAlgorithm>& info) {
  return std::string(to_string(info.param));
}

class AllReduceFaults : public ::testing::TestWithParam<algorithms::AllReduceAlgorithm> {
 protected:
  static constexpr int kRanks = 5;  // not a power of two: halving-doubling folds
  static constexpr int kVictim = 2;
  static constexpr std::size_t kCount = 1000;

  algorithms::CollectiveOptions options(std::chrono::milliseconds deadline) const {
    algorithms::CollectiveOptions o;
    o.seq = 7;
    o.algorithm = GetParam();
    o.chunk_bytes = 64;
    o.deadline = Deadline::after(deadline);
    return o;
  }
};

TEST_P(AllReduceFaults, KilledPeerFailsEveryoneWithPeerLost) {
  algorithms::MemoryFabric fabric(kRanks);
  const auto deadline = std::chrono::seconds(5);
  const algorithms::CollectiveOptions opts = options(deadline);
  // The direct algorithm's first send carries a whole vector; elsewhere one chunk has
  // gone out before the victim dies, so nobody can have seen all of its data.
  const int allowed = GetParam() == algorithms::AllReduceAlgorithm::kDirect ? 0 : 1;
  const auto start = Clock::now();
  const auto statuses = testing::run_ranks(kRanks, [&](int r) {
    std::vector<float> data(kCount, 1.0f);
    Status st;
    if (r == kVictim) {
      DyingLink link(fabric, r, allowed);
      st =
          all_reduce(link, data.data(), data.data(), kCount, DType::kFloat32, ReduceOp::kSum, opts);
    } else {
      st = all_reduce(fabric.link(r), data.data(), data.data(), kCount, DType::kFloat32,
                      ReduceOp::kSum, opts);
    }
    if (!st.is_ok()) fabric.kill(r);
    return st;
  });
  EXPECT_LT(Clock::now() - start, deadline);
  for (int r = 0; r < kRanks; ++r) {
    const Status& st = statuses[static_cast<std::size_t>(r)];
    if (r == kVictim) {
      EXPECT_FALSE(st.is_ok());
    } else {
      EXPECT_EQ(st.code(), StatusCode::kPeerLost) << "rank " << r << ": " << st.to_string();
    }
  }
}

TEST_P(AllReduceFaults, FrozenPeerTimesEveryoneOutAtTheDeadline) {
  algorithms::MemoryFabric fabric(kRanks);
  fabric.freeze(kVictim);
  const auto deadline = std::chrono::milliseconds(300);
  const algorithms::CollectiveOptions opts = options(deadline);
  const auto start = Clock::now();
  const auto statuses = testing::run_ranks(kRanks, [&](int r) {
    std::vector<float> data(kCount, 1.0f);
    return all_reduce(fabric.link(r), data.data(), data.data(), kCount, DType::kFloat32,
                      ReduceOp::kSum, opts);
  });
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, deadline);
  EXPECT_LT(elapsed, deadline + std::chrono::seconds(2)) << "returned long after the deadline";
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;  // it may even finish: what it receives still arrives
    const Status& st = statuses[static_cast<std::size_t>(r)];
    EXPECT_EQ(st.code(), StatusCode::kTimedOut) << "rank " << r << ": " << st.to_string();
  }
}

void expect_disagreement_fails_everywhere(algorithms::AllReduceAlgorithm algorithm, int n,
                                          int odd_rank, std::size_t odd_count, DType odd_dtype) {
  algorithms::MemoryFabric fabric(n);
  algorithms::CollectiveOptions opts;
  opts.seq = 3;
  opts.algorithm = algorithm;
  opts.chunk_bytes = 64;
  const auto deadline = std::chrono::seconds(5);
  opts.deadline = Deadline::after(deadline);
  const auto start = Clock::now();
  const auto statuses = testing::run_ranks(n, [&](int r) {
    const std::size_t count = r == odd_rank ? odd_count : 100;
    const DType dtype = r == odd_rank ? odd_dtype : DType::kFloat32;
    std::vector<std::byte> data(count * dtype_size(dtype), std::byte{0});
    Status st =
        all_reduce(fabric.link(r), data.data(), data.data(), count, dtype, ReduceOp::kSum, opts);
    if (!st.is_ok()) fabric.kill(r);
    return st;
  });
  EXPECT_LT(Clock::now() - start, deadline);
  int mismatches = 0;
  for (int r = 0; r < n; ++r) {
    const Status& st = statuses[static_cast<std::size_t>(r)];
    EXPECT_FALSE(st.is_ok()) << "rank " << r << " succeeded although ranks disagreed";
    if (st.code() == StatusCode::kMismatch) ++mismatches;
  }
  EXPECT_GE(mismatches, 1) << "nobody noticed the disagreement itself";
}

TEST_P(AllReduceFaults, MismatchedCountFailsEveryRank) {
  expect_disagreement_fails_everywhere(GetParam(), kRanks, 0, 101, DType::kFloat32);
  expect_disagreement_fails_everywhere(GetParam(), 4, 3, 99, DType::kFloat32);
}

TEST_P(AllReduceFaults, MismatchedDTypeFailsEveryRank) {
  // Same element size: only the descriptor check can tell.
  expect_disagreement_fails_everywhere(GetParam(), kRanks, 1, 100, DType::kInt32);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AllReduceFaults, ::testing::ValuesIn(kAlgorithms), name_of);

TEST(RingCollectivesFaults, ZeroCountOnOneRankIsNotSuccessEverywhere) {
  // A rank called with count 0 still meets its ring neighbours, so it cannot return kOk
  // while its peers wait for its data.
  algorithms::MemoryFabric fabric(3);
  algorithms::CollectiveOptions opts;
  opts.chunk_bytes = 64;
  opts.deadline = Deadline::after(std::chrono::seconds(5));
  const auto statuses = testing::run_ranks(3, [&](int r) {
    const std::size_t count = r == 1 ? 0 : 40;
    std::vector<float> data(count * 3 + 1, 1.0f);
    Status st = reduce_scatter(fabric.link(r), data.data(), data.data() + r * count, count,
                               DType::kFloat32, ReduceOp::kSum, opts);
    if (!st.is_ok()) fabric.kill(r);
    return st;
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_FALSE(statuses[static_cast<std::size_t>(r)].is_ok()) << "rank " << r;
}

TEST(RingCollectivesFaults, KilledPeerDuringAllGather) {
  algorithms::MemoryFabric fabric(4);
  algorithms::CollectiveOptions opts;
  opts.chunk_bytes = 64;
  opts.deadline = Deadline::after(std::chrono::seconds(5));
  const auto statuses = testing::run_ranks(4, [&](int r) {
    std::vector<float> out(4 * 200, 0.0f), in(200, 1.0f);
    Status st;
    if (r == 1) {
      DyingLink link(fabric, r, 2);
      st = all_gather(link, in.data(), out.data(), 200, DType::kFloat32, opts);
    } else {
      st = all_gather(fabric.link(r), in.data(), out.data(), 200, DType::kFloat32, opts);
    }
    if (!st.is_ok()) fabric.kill(r);
    return st;
  });
  for (int r = 0; r < 4; ++r) {
    if (r == 1) continue;
    EXPECT_EQ(statuses[static_cast<std::size_t>(r)].code(), StatusCode::kPeerLost) << "rank " << r;
  }
}

}  // namespace
}  // namespace tributary
