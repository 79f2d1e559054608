// all_reduce sweeps: algorithm x world size x count x layout x dtype x op, ranks as
// threads over MemoryFabric. Each rank thread runs a whole batch of collectives on the
// same links (consecutive seq), which keeps thread spawns per test to one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "all_reduce_batch.h"
#include "test_values.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using testing::Bytes;

constexpr algorithms::AllReduceAlgorithm kAlgorithms[] = {
    algorithms::AllReduceAlgorithm::kAuto,
    algorithms::AllReduceAlgorithm::kRing,
    algorithms::AllReduceAlgorithm::kTree,
    algorithms::AllReduceAlgorithm::kDoubleTree,
    algorithms::AllReduceAlgorithm::kHalvingDoubling,
    algorithms::AllReduceAlgorithm::kDirect};

using testing::Case;
using testing::run_batch;

// --- full sweep over world sizes and counts ------------------------------------------

// The third axis: links that combine as they receive (the fused paths) or not.
using SweepParam = std::tuple<algorithms::AllReduceAlgorithm, int, bool>;
class AllReduceSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(AllReduceSweep, CountsLayoutsAndChunking) {
  const auto [algorithm, n, combining] = GetParam();
  const auto un = static_cast<std::size_t>(n);
  std::vector<std::size_t> small = {0, 1, 7, un + 1, 1000};
  if (n > 1) small.push_back(un - 1);
  std::vector<Case> cases;
  for (bool in_place : {false, true}) {
    for (std::size_t count : small) {
      cases.push_back({count, DType::kFloat32, ReduceOp::kSum, in_place, 64});
      cases.push_back({count, DType::kInt32, ReduceOp::kMax, in_place, 64});
      cases.push_back({count, DType::kBFloat16, ReduceOp::kAvg, in_place, 64});
    }
    // Many chunks of odd length per block, and the default chunking across two chunks.
    cases.push_back({4099, DType::kFloat32, ReduceOp::kSum, in_place, 64});
    cases.push_back({4099, DType::kInt64, ReduceOp::kProd, in_place, 96});
    cases.push_back({70001, DType::kFloat32, ReduceOp::kSum, in_place, 256 * 1024});
    cases.push_back({1001, DType::kFloat32, ReduceOp::kSum, in_place, 64, true});
  }
  run_batch(algorithm, n, cases, {}, combining);
}

std::string algorithm_name(algorithms::AllReduceAlgorithm a) { return std::string(to_string(a)); }

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AllReduceSweep,
                         ::testing::Combine(::testing::ValuesIn(kAlgorithms),
                                            ::testing::Range(1, 17), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return algorithm_name(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_combining" : "");
                         });

// --- every dtype x op at a few sizes -------------------------------------------------

using MatrixParam = std::tuple<algorithms::AllReduceAlgorithm, int, bool>;
class AllReduceMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(AllReduceMatrix, EveryDTypeAndOp) {
  const auto [algorithm, n, combining] = GetParam();
  std::vector<Case> cases;
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (std::size_t count : {std::size_t{1}, std::size_t{13}, std::size_t{301}}) {
        cases.push_back({count, static_cast<DType>(d), static_cast<ReduceOp>(o), count == 13, 64});
      }
    }
  }
  run_batch(algorithm, n, cases, {}, combining);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AllReduceMatrix,
                         ::testing::Combine(::testing::ValuesIn(kAlgorithms),
                                            ::testing::Values(2, 3, 6, 8), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<MatrixParam>& info) {
                           return algorithm_name(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_combining" : "");
                         });

// Combining as the bytes arrive gives the bits of receiving, then reducing: rounding floats
// (where order would show) through every algorithm, with and without the fused paths.
TEST(AllReduceCombining, SameBitsAsReceiveThenReduce) {
  for (const auto algorithm : kAlgorithms) {
    for (int n : {2, 3, 4, 5, 8}) {
      std::vector<std::vector<Bytes>> results;
      for (bool combining : {false, true}) {
        algorithms::MemoryFabric fabric(n);
        fabric.set_combining(combining);
        std::vector<Bytes> out(static_cast<std::size_t>(n));
        const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
          Bytes data = testing::make_random_input(DType::kFloat32, r, 5003, 7);
          algorithms::CollectiveOptions options;
          options.seq = 1;
          options.algorithm = algorithm;
          options.chunk_bytes = 1024;
          options.deadline = Deadline::after(std::chrono::seconds(20));
          Status st = all_reduce(fabric.link(r), data.data(), data.data(), 5003, DType::kFloat32,
                                 ReduceOp::kSum, options);
          out[static_cast<std::size_t>(r)] = std::move(data);
          return st;
        });
        for (const Status& st : statuses) ASSERT_TRUE(st.is_ok()) << st.to_string();
        results.push_back(std::move(out));
      }
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(results[0][static_cast<std::size_t>(r)], results[1][static_cast<std::size_t>(r)])
            << algorithm_name(algorithm) << " n=" << n << " rank " << r;
      }
    }
  }
}

// --- names and arguments -----------------------------------------------------------

TEST(AllReduceAlgorithmNames, RoundTrip) {
  for (int i = 0; i < algorithms::kNumAllReduceAlgorithms; ++i) {
    const auto a = static_cast<algorithms::AllReduceAlgorithm>(i);
    algorithms::AllReduceAlgorithm parsed = algorithms::AllReduceAlgorithm::kAuto;
    ASSERT_TRUE(algorithms::parse_all_reduce_algorithm(to_string(a), &parsed)) << to_string(a);
    EXPECT_EQ(parsed, a);
  }
  algorithms::AllReduceAlgorithm parsed = algorithms::AllReduceAlgorithm::kAuto;
  EXPECT_TRUE(algorithms::parse_all_reduce_algorithm("Double-Tree", &parsed));
  EXPECT_EQ(parsed, algorithms::AllReduceAlgorithm::kDoubleTree);
  EXPECT_TRUE(algorithms::parse_all_reduce_algorithm("rabenseifner", &parsed));
  EXPECT_EQ(parsed, algorithms::AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_FALSE(algorithms::parse_all_reduce_algorithm("butterfly", &parsed));
  EXPECT_FALSE(algorithms::parse_all_reduce_algorithm("", &parsed));
}

TEST(AllReduceArguments, RejectedBeforeAnyMessage) {
  algorithms::MemoryFabric fabric(1);
  std::vector<float> buf(16, 1.0f);
  algorithms::CollectiveOptions options;
  // Partial overlap is neither in-place nor out-of-place.
  EXPECT_EQ(all_reduce(fabric.link(0), buf.data(), buf.data() + 1, 8, DType::kFloat32,
                       ReduceOp::kSum, options)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      all_reduce(fabric.link(0), nullptr, buf.data(), 8, DType::kFloat32, ReduceOp::kSum, options)
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(all_reduce(fabric.link(0), buf.data(), buf.data(), 8, static_cast<DType>(99),
                       ReduceOp::kSum, options)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(all_reduce(fabric.link(0), buf.data(), buf.data(), 8, DType::kFloat32,
                       static_cast<ReduceOp>(42), options)
                .code(),
            StatusCode::kInvalidArgument);
  options.chunk_bytes = 0;
  EXPECT_EQ(all_reduce(fabric.link(0), buf.data(), buf.data(), 8, DType::kFloat32, ReduceOp::kSum,
                       options)
                .code(),
            StatusCode::kInvalidArgument);
  options.chunk_bytes = 64;
  options.algorithm = static_cast<algorithms::AllReduceAlgorithm>(17);
  EXPECT_EQ(all_reduce(fabric.link(0), buf.data(), buf.data(), 8, DType::kFloat32, ReduceOp::kSum,
                       options)
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
