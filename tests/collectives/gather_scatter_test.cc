#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

struct Point {
  std::size_t count;
  int root;
  bool in_place;
};

std::vector<Point> block_runs(int n, DType dtype) {
  std::vector<Point> runs;
  for (const CountCase& c : count_cases(n, dtype, 4099, /*chunked=*/false)) {
    for (int root : roots_for(n)) runs.push_back({c.count, root, (runs.size() % 2) == 1});
  }
  return runs;
}

algorithms::CollectiveOptions options_for(std::size_t seq) {
  algorithms::CollectiveOptions options;
  options.seq = seq;
  options.deadline = Deadline::after(std::chrono::seconds(20));
  return options;
}

using Param = std::tuple<int, DType>;
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return sweep_name(std::get<0>(info.param), std::get<1>(info.param));
}

class GatherSweep : public ::testing::TestWithParam<Param> {};

TEST_P(GatherSweep, RootHoldsBlocksInRankOrder) {
  const auto [n, dtype] = GetParam();
  const std::size_t esize = dtype_size(dtype);
  const std::vector<Point> runs = block_runs(n, dtype);
  std::vector<std::vector<std::vector<std::byte>>> in(n);
  std::vector<std::vector<std::byte>> out, expected;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t block = runs[k].count * esize;
    expected.emplace_back();
    for (int r = 0; r < n; ++r) {
      in[r].push_back(pattern(k * 64 + r, block));
      expected.back().insert(expected.back().end(), in[r].back().begin(), in[r].back().end());
    }
    out.push_back(pattern(99999 + k, block * n));
    if (runs[k].in_place && block != 0) {
      const int root = runs[k].root;
      std::memcpy(out.back().data() + root * block, in[root].back().data(), block);
    }
  }
  algorithms::MemoryFabric fabric(n);
  const auto statuses = run_ranks(n, [&](int r) {
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const Point& run = runs[k];
      const std::size_t block = run.count * esize;
      void* recv = r == run.root ? out[k].data() : nullptr;
      const void* send = in[r][k].data();
      if (r == run.root && run.in_place) send = out[k].data() + r * block;
      Status s = gather(fabric.link(r), send, recv, run.count, dtype, run.root, options_for(k));
      if (!s.is_ok()) return annotate(s, "run " + std::to_string(k));
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].is_ok()) << statuses[r].to_string();
  for (std::size_t k = 0; k < runs.size(); ++k) {
    ASSERT_EQ(out[k], expected[k]) << "count " << runs[k].count << " root " << runs[k].root;
  }
}

class ScatterSweep : public ::testing::TestWithParam<Param> {};

TEST_P(ScatterSweep, RankGetsItsBlock) {
  const auto [n, dtype] = GetParam();
  const std::size_t esize = dtype_size(dtype);
  const std::vector<Point> runs = block_runs(n, dtype);
  std::vector<std::vector<std::byte>> in;
  std::vector<std::vector<std::vector<std::byte>>> out(n);
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t block = runs[k].count * esize;
    in.push_back(pattern(k, block * n));
    for (int r = 0; r < n; ++r) out[r].push_back(pattern(5000 + k * 64 + r, block));
  }
  algorithms::MemoryFabric fabric(n);
  const auto statuses = run_ranks(n, [&](int r) {
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const Point& run = runs[k];
      const std::size_t block = run.count * esize;
      const bool in_place = run.in_place && r == run.root;
      // In place, the root's recv is its own block inside send.
      void* recv = in_place ? in[k].data() + r * block : out[r][k].data();
      const void* send = r == run.root ? in[k].data() : nullptr;
      Status s = scatter(fabric.link(r), send, recv, run.count, dtype, run.root, options_for(k));
      if (!s.is_ok()) return annotate(s, "run " + std::to_string(k));
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].is_ok()) << statuses[r].to_string();
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t block = runs[k].count * esize;
    const std::vector<std::byte> original = pattern(k, block * n);
    ASSERT_EQ(in[k], original) << "root's send modified";
    for (int r = 0; r < n; ++r) {
      if (runs[k].in_place && r == runs[k].root) continue;
      const std::vector<std::byte> want(original.begin() + r * block,
                                        original.begin() + (r + 1) * block);
      ASSERT_EQ(out[r][k], want) << "rank " << r << " count " << runs[k].count << " root "
                                 << runs[k].root;
    }
  }
}

const auto kWorldsByDtype =
    ::testing::Combine(::testing::Range(1, kMaxWorld + 1), ::testing::ValuesIn(all_dtypes()));
INSTANTIATE_TEST_SUITE_P(Worlds, GatherSweep, kWorldsByDtype, param_name);
INSTANTIATE_TEST_SUITE_P(Worlds, ScatterSweep, kWorldsByDtype, param_name);

TEST(GatherScatter, RootOutOfRangeIsInvalidArgument) {
  algorithms::MemoryFabric fabric(2);
  std::vector<int> buf(8);
  EXPECT_EQ(gather(fabric.link(0), buf.data(), buf.data(), 4, DType::kInt32, 5, {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scatter(fabric.link(1), buf.data(), buf.data(), 4, DType::kInt32, -1, {}).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::testing
