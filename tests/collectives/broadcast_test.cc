#include <gtest/gtest.h>

#include <tuple>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

struct Point {
  CountCase shape;
  int root;
  bool in_place;
};

class BroadcastSweep : public ::testing::TestWithParam<std::tuple<int, DType>> {};

// Every (count, chunk, root) point runs back to back on one fabric with increasing seq,
// which also checks that consecutive collectives on the same links do not mix.
TEST_P(BroadcastSweep, EveryRankGetsRootsBytes) {
  const auto [n, dtype] = GetParam();
  const std::size_t esize = dtype_size(dtype);
  std::vector<Point> runs;
  for (const CountCase& c : count_cases(n, dtype, 70001, /*chunked=*/true)) {
    for (int root : roots_for(n)) runs.push_back({c, root, (runs.size() % 2) == 1});
  }
  std::vector<std::vector<std::byte>> inputs;
  // out[rank][run], pre-filled with bytes unlike the input so unwritten chunks show.
  std::vector<std::vector<std::vector<std::byte>>> out(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t bytes = runs[k].shape.count * esize;
    inputs.push_back(pattern(k, bytes));
    for (int r = 0; r < n; ++r) out[r].push_back(pattern(1000 + k * 31 + r, bytes));
    if (runs[k].in_place) out[runs[k].root].back() = inputs.back();
  }

  algorithms::MemoryFabric fabric(n);
  const auto statuses = run_ranks(n, [&](int r) {
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const Point& run = runs[k];
      algorithms::CollectiveOptions options;
      options.seq = k;
      options.chunk_bytes = run.shape.chunk_bytes;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      void* recv = out[r][k].data();
      const void* send = nullptr;  // read on the root only
      if (r == run.root) send = run.in_place ? recv : inputs[k].data();
      Status s = broadcast(fabric.link(r), send, recv, run.shape.count, dtype, run.root, options);
      if (!s.is_ok()) return annotate(s, "run " + std::to_string(k));
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].is_ok()) << "rank " << r << ": " << statuses[r].to_string();
  }
  for (std::size_t k = 0; k < runs.size(); ++k) {
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r][k], inputs[k])
          << "rank " << r << " count " << runs[k].shape.count << " chunk "
          << runs[k].shape.chunk_bytes << " root " << runs[k].root;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, BroadcastSweep,
                         ::testing::Combine(::testing::Range(1, kMaxWorld + 1),
                                            ::testing::ValuesIn(all_dtypes())),
                         [](const auto& info) {
                           return sweep_name(std::get<0>(info.param), std::get<1>(info.param));
                         });

TEST(Broadcast, RelayForwardsFirstChunkBeforeTheRestArrives) {
  constexpr int kWorld = 4;
  constexpr std::size_t kCount = 4096;
  algorithms::MemoryFabric fabric(kWorld);
  FirstSendProbe relay(fabric.link(1));
  std::vector<float> in(kCount, 1.25f);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(kCount));
  const auto statuses = run_ranks(kWorld, [&](int r) {
    algorithms::CollectiveOptions options;
    options.chunk_bytes = 128;  // 128 chunks: a chain
    algorithms::Link& link = r == 1 ? relay : fabric.link(r);
    return broadcast(link, in.data(), out[r].data(), kCount, DType::kFloat32, 0, options);
  });
  for (const Status& s : statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(relay.waits_before_first_send(), 1);
  EXPECT_EQ(out[3], in);
}

TEST(Broadcast, RootOutOfRangeIsInvalidArgument) {
  algorithms::MemoryFabric fabric(3);
  std::vector<float> buf(4);
  for (int root : {-1, 3}) {
    EXPECT_EQ(
        broadcast(fabric.link(0), buf.data(), buf.data(), buf.size(), DType::kFloat32, root, {})
            .code(),
        StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace tributary::testing
