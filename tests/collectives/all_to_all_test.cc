#include <gtest/gtest.h>

#include <tuple>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

class AllToAllSweep : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(AllToAllSweep, BlockJOfRankIBecomesBlockIOfRankJ) {
  const auto [n, dtype] = GetParam();
  const std::size_t esize = dtype_size(dtype);
  const std::vector<CountCase> cases = count_cases(n, dtype, 4099, /*chunked=*/false);
  std::vector<std::vector<std::vector<std::byte>>> in(n), out(n);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::size_t bytes = cases[k].count * esize * n;
    for (int r = 0; r < n; ++r) {
      in[r].push_back(pattern(k * 64 + r, bytes));
      out[r].push_back(pattern(7777 + k * 64 + r, bytes));
    }
  }
  algorithms::MemoryFabric fabric(n);
  const auto statuses = run_ranks(n, [&](int r) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      algorithms::CollectiveOptions options;
      options.seq = k;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      Status s = all_to_all(fabric.link(r), in[r][k].data(), out[r][k].data(), cases[k].count,
                            dtype, options);
      if (!s.is_ok()) return annotate(s, "run " + std::to_string(k));
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].is_ok()) << statuses[r].to_string();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::ptrdiff_t block = static_cast<std::ptrdiff_t>(cases[k].count * esize);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        ASSERT_TRUE(std::equal(in[i][k].begin() + j * block, in[i][k].begin() + (j + 1) * block,
                               out[j][k].begin() + i * block))
            << "block " << j << " of rank " << i << ", count " << cases[k].count;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllToAllSweep,
                         ::testing::Combine(::testing::Range(1, kMaxWorld + 1),
                                            ::testing::ValuesIn(all_dtypes())),
                         [](const auto& info) {
                           return sweep_name(std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST(AllToAll, InPlaceIsInvalidArgument) {
  algorithms::MemoryFabric fabric(2);
  std::vector<float> buf(4);
  EXPECT_EQ(all_to_all(fabric.link(0), buf.data(), buf.data(), 2, DType::kFloat32, {}).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::testing
