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

// Rank i sends (i * 3 + j * 5) % 7 elements to rank j (zeros included), packed in rank order.
std::size_t v_count(int i, int j) { return static_cast<std::size_t>((i * 3 + j * 5) % 7); }

TEST(AllToAllV, UnevenCountsLandAtTheirOffsets) {
  for (int n = 1; n <= 5; ++n) {
    std::vector<std::vector<float>> in(n), out(n);
    std::vector<std::vector<std::size_t>> sc(n), so(n), rc(n), ro(n);
    for (int r = 0; r < n; ++r) {
      std::size_t s_off = 0;
      std::size_t r_off = 1;  // a gap in front: offsets are honoured, not assumed packed
      for (int p = 0; p < n; ++p) {
        sc[r].push_back(v_count(r, p));
        so[r].push_back(s_off);
        s_off += v_count(r, p);
        rc[r].push_back(v_count(p, r));
        ro[r].push_back(r_off);
        r_off += v_count(p, r);
      }
      for (std::size_t e = 0; e < s_off; ++e) in[r].push_back(static_cast<float>(r * 1000 + e));
      out[r].assign(r_off, -1.0f);
    }
    algorithms::MemoryFabric fabric(n);
    const auto statuses = run_ranks(n, [&](int r) {
      algorithms::CollectiveOptions options;
      options.seq = 1;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      return all_to_all_v(fabric.link(r), in[r].data(), sc[r], so[r], out[r].data(), rc[r], ro[r],
                          DType::kFloat32, options);
    });
    for (int r = 0; r < n; ++r) ASSERT_TRUE(statuses[r].is_ok()) << statuses[r].to_string();
    for (int j = 0; j < n; ++j) {
      EXPECT_EQ(out[j][0], -1.0f) << "the gap in front stays untouched";
      for (int i = 0; i < n; ++i) {
        for (std::size_t e = 0; e < v_count(i, j); ++e) {
          ASSERT_EQ(out[j][ro[j][i] + e], in[i][so[i][j] + e])
              << "n " << n << ": element " << e << " from rank " << i << " to rank " << j;
        }
      }
    }
  }
}

TEST(AllToAllV, AReceiverExpectingAnotherCountIsAMismatchOnBothSides) {
  algorithms::MemoryFabric fabric(2);
  std::vector<std::vector<float>> in(2, std::vector<float>(8, 1.0f)), out(2, std::vector<float>(8));
  const auto statuses = run_ranks(2, [&](int r) {
    algorithms::CollectiveOptions options;
    options.seq = 1;
    options.deadline = Deadline::after(std::chrono::seconds(20));
    const std::vector<std::size_t> counts = {2, 2};
    const std::vector<std::size_t> offsets = {0, 2};
    // Rank 1 expects 3 elements from rank 0, which sends 2.
    const std::vector<std::size_t> expect = r == 1 ? std::vector<std::size_t>{3, 2} : counts;
    return all_to_all_v(fabric.link(r), in[r].data(), counts, offsets, out[r].data(), expect,
                        std::vector<std::size_t>{0, 3}, DType::kFloat32, options);
  });
  EXPECT_EQ(statuses[1].code(), StatusCode::kMismatch) << statuses[1].to_string();
}

TEST(AllToAllV, WrongNumberOfCountsIsInvalidArgument) {
  algorithms::MemoryFabric fabric(2);
  std::vector<float> in(4), out(4);
  const std::vector<std::size_t> one = {2};
  EXPECT_EQ(all_to_all_v(fabric.link(0), in.data(), one, one, out.data(), one, one,
                         DType::kFloat32, {})
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::testing
