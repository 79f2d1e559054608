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

struct Case {
  std::size_t count;
  DType dtype;
  ReduceOp op;
  bool in_place;
  std::size_t chunk_bytes;
  bool random = false;  // rounding floats: compared with a tolerance, not bitwise
};

std::string describe(algorithms::AllReduceAlgorithm a, int n, const Case& c) {
  std::ostringstream s;
  s << to_string(a) << " n=" << n << " count=" << c.count << " " << to_string(c.dtype) << " "
    << to_string(c.op) << (c.in_place ? " in-place" : " out-of-place") << " chunk=" << c.chunk_bytes
    << (c.random ? " random" : "");
  return s.str();
}

// Runs `cases` one after another on every rank and checks each result: identical bits on
// every rank, equal to the sequential reference (within a tolerance for random floats),
// send untouched out of place.
void run_batch(algorithms::AllReduceAlgorithm algorithm, int n, const std::vector<Case>& cases) {
  algorithms::MemoryFabric fabric(n);
  std::vector<std::vector<Bytes>> inputs(cases.size());
  std::vector<std::vector<Bytes>> send(cases.size()), recv(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    for (int r = 0; r < n; ++r) {
      inputs[k].push_back(
          c.random ? testing::make_random_input(c.dtype, r, c.count, static_cast<unsigned>(k))
                   : testing::make_input(c.dtype, c.op, r, c.count));
    }
    send[k] = inputs[k];
    recv[k].assign(static_cast<std::size_t>(n),
                   Bytes(c.count * dtype_size(c.dtype), std::byte{0xCD}));
    if (c.in_place) recv[k] = inputs[k];
  }
  const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
    const auto ur = static_cast<std::size_t>(r);
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      algorithms::CollectiveOptions options;
      options.seq = k + 1;
      options.algorithm = algorithm;
      options.chunk_bytes = c.chunk_bytes;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      void* out = recv[k][ur].data();
      const void* in = c.in_place ? out : send[k][ur].data();
      Status st = all_reduce(fabric.link(r), in, out, c.count, c.dtype, c.op, options);
      if (!st.is_ok()) return error(st.code(), describe(algorithm, n, c) + ": " + st.message());
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << "rank " << r << ": " << statuses[static_cast<std::size_t>(r)].to_string();
  }
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(describe(algorithm, n, c));
    const Bytes want = testing::reference_reduce(inputs[k], c.count, c.dtype, c.op);
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      EXPECT_EQ(testing::first_difference(recv[k][ur], recv[k][0], c.dtype), "")
          << "rank " << r << " differs from rank 0";
      if (!c.in_place) {
        EXPECT_EQ(send[k][ur], inputs[k][ur]) << "rank " << r << " send modified";
      }
    }
    if (!c.random) {
      EXPECT_EQ(testing::first_difference(recv[k][0], want, c.dtype), "");
      continue;
    }
    const std::size_t es = dtype_size(c.dtype);
    double worst = 0;
    for (std::size_t i = 0; i < c.count; ++i) {
      worst = std::max(worst, std::abs(testing::load_value(c.dtype, recv[k][0].data() + i * es) -
                                       testing::load_value(c.dtype, want.data() + i * es)));
    }
    EXPECT_LE(worst, 1e-5 * n) << "largest deviation from the sequential reference";
  }
}

// --- full sweep over world sizes and counts ------------------------------------------

using SweepParam = std::tuple<algorithms::AllReduceAlgorithm, int>;
class AllReduceSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(AllReduceSweep, CountsLayoutsAndChunking) {
  const auto [algorithm, n] = GetParam();
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
  run_batch(algorithm, n, cases);
}

std::string algorithm_name(algorithms::AllReduceAlgorithm a) { return std::string(to_string(a)); }

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AllReduceSweep,
                         ::testing::Combine(::testing::ValuesIn(kAlgorithms),
                                            ::testing::Range(1, 17)),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return algorithm_name(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

// --- every dtype x op at a few sizes -------------------------------------------------

using MatrixParam = std::tuple<algorithms::AllReduceAlgorithm, int>;
class AllReduceMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(AllReduceMatrix, EveryDTypeAndOp) {
  const auto [algorithm, n] = GetParam();
  std::vector<Case> cases;
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (std::size_t count : {std::size_t{1}, std::size_t{13}, std::size_t{301}}) {
        cases.push_back({count, static_cast<DType>(d), static_cast<ReduceOp>(o), count == 13, 64});
      }
    }
  }
  run_batch(algorithm, n, cases);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AllReduceMatrix,
                         ::testing::Combine(::testing::ValuesIn(kAlgorithms),
                                            ::testing::Values(2, 3, 6, 8)),
                         [](const ::testing::TestParamInfo<MatrixParam>& info) {
                           return algorithm_name(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

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
