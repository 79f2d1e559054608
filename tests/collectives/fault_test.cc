// Faults and disagreements: every rank whose result depends on a lost, silent or
// disagreeing peer must return an error by the deadline, never a hang and never wrong
// bytes. Ranks that only send toward a lost peer (upstream in a broadcast, off-path in a
// tree) may legitimately finish: a rooted collective has no path back to them, which is
// why the runtime runs an agreement step before committing (DESIGN.md).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

constexpr auto kShortDeadline = std::chrono::milliseconds(200);
// How long past its deadline a rank may take to notice: scheduling on a loaded 2-core box.
constexpr auto kSlack = std::chrono::seconds(2);

// Many chunks, so broadcast and reduce run along a chain (collective_util.h).
constexpr std::size_t kChainCount = 2000;
constexpr std::size_t kChainChunkBytes = 256;

algorithms::CollectiveOptions short_options(std::size_t chunk_bytes = kChainChunkBytes) {
  algorithms::CollectiveOptions options;
  options.seq = 7;
  options.chunk_bytes = chunk_bytes;
  options.deadline = Deadline::after(kShortDeadline);
  return options;
}

// Runs the ranks and checks that none of them outlived the deadline by more than kSlack.
std::vector<Status> run_bounded(int n, const std::function<Status(int)>& body) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> statuses = run_ranks(n, body);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kShortDeadline + kSlack);
  return statuses;
}

std::string describe(const std::vector<Status>& statuses) {
  std::string out;
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    out += "\n  rank " + std::to_string(r) + ": " + statuses[r].to_string();
  }
  return out;
}

void expect_codes(const std::vector<Status>& statuses, const std::map<int, StatusCode>& want) {
  for (const auto& [rank, code] : want) {
    EXPECT_EQ(statuses[rank].code(), code) << "rank " << rank << describe(statuses);
  }
}

// --- a rank killed ------------------------------------------------------------------

TEST(Fault, BroadcastRootsChildKilledBeforeStartFailsEveryone) {
  constexpr int kWorld = 6;
  const int root = 2;
  const int victim = 3;  // root's successor in the chain: every other rank depends on it
  algorithms::MemoryFabric fabric(kWorld);
  fabric.kill(victim);
  std::vector<float> in(kChainCount, 1.5f);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(kChainCount));
  const auto options = short_options();
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == victim) return error(StatusCode::kAborted, "dead");
    return broadcast(fabric.link(r), in.data(), out[r].data(), kChainCount, DType::kFloat32, root,
                     options);
  });
  expect_codes(statuses, {{root, StatusCode::kPeerLost},
                          {4, StatusCode::kPeerLost},
                          {5, StatusCode::kTimedOut},
                          {0, StatusCode::kTimedOut},
                          {1, StatusCode::kTimedOut}});
}

TEST(Fault, BroadcastRankKilledMidwayFailsEveryRankBelowIt) {
  constexpr int kWorld = 6;
  const int victim = 2;
  algorithms::MemoryFabric fabric(kWorld);
  TriggerLink dying(fabric.link(victim), 7, [&] { fabric.kill(victim); });
  std::vector<float> in(kChainCount);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(kChainCount, -1.0f));
  const auto options = short_options();
  const auto statuses = run_bounded(kWorld, [&](int r) {
    algorithms::Link& link = r == victim ? dying : fabric.link(r);
    return broadcast(link, in.data(), out[r].data(), kChainCount, DType::kFloat32, 0, options);
  });
  expect_codes(statuses, {{victim, StatusCode::kAborted},
                          {3, StatusCode::kPeerLost},
                          {4, StatusCode::kTimedOut},
                          {5, StatusCode::kTimedOut}});
  // Upstream ranks either finished with the right bytes or saw the loss.
  EXPECT_TRUE(statuses[0].is_ok()) << describe(statuses);
  if (statuses[1].is_ok()) {
    EXPECT_EQ(out[1], in);
  } else {
    EXPECT_EQ(statuses[1].code(), StatusCode::kPeerLost);
  }
}

TEST(Fault, BroadcastTreeLosesExactlyTheDeadSubtree) {
  // One chunk over 8 ranks runs on the binary tree 0 -> {1, 2}, 1 -> {3, 4}, 3 -> {7}.
  constexpr int kWorld = 8;
  constexpr std::size_t kCount = 64;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.kill(1);
  std::vector<std::int32_t> in(kCount, 42);
  std::vector<std::vector<std::int32_t>> out(kWorld, std::vector<std::int32_t>(kCount));
  const auto options = short_options(kDefaultChunk);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == 1) return error(StatusCode::kAborted, "dead");
    return broadcast(fabric.link(r), in.data(), out[r].data(), kCount, DType::kInt32, 0, options);
  });
  expect_codes(statuses, {{0, StatusCode::kPeerLost},
                          {3, StatusCode::kPeerLost},
                          {4, StatusCode::kPeerLost},
                          {7, StatusCode::kTimedOut}});
  for (int r : {2, 5, 6}) {
    EXPECT_TRUE(statuses[r].is_ok()) << describe(statuses);
    EXPECT_EQ(out[r], in) << "rank " << r;
  }
}

TEST(Fault, ReduceFirstRankOfChainKilledMidwayFailsEveryone) {
  // The reduce chain runs 5 -> 4 -> ... -> 0 (root): every rank depends on rank 5.
  constexpr int kWorld = 6;
  const int victim = 5;
  algorithms::MemoryFabric fabric(kWorld);
  TriggerLink dying(fabric.link(victim), 6, [&] { fabric.kill(victim); });
  std::vector<double> in(kChainCount, 1.0);
  std::vector<double> out(kChainCount, -1.0);
  const std::vector<double> untouched = out;
  const auto options = short_options();
  const auto statuses = run_bounded(kWorld, [&](int r) {
    algorithms::Link& link = r == victim ? dying : fabric.link(r);
    return reduce(link, in.data(), r == 0 ? out.data() : nullptr, kChainCount, DType::kFloat64,
                  ReduceOp::kSum, 0, options);
  });
  expect_codes(statuses, {{victim, StatusCode::kAborted},
                          {4, StatusCode::kPeerLost},
                          {3, StatusCode::kTimedOut},
                          {2, StatusCode::kTimedOut},
                          {1, StatusCode::kTimedOut},
                          {0, StatusCode::kTimedOut}});
}

TEST(Fault, ReduceRootsChildKilledFailsRoot) {
  constexpr int kWorld = 5;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.kill(1);
  std::vector<std::int64_t> in(kChainCount, 3);
  std::vector<std::int64_t> out(kChainCount);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == 1) return error(StatusCode::kAborted, "dead");
    return reduce(fabric.link(r), in.data(), out.data(), kChainCount, DType::kInt64, ReduceOp::kMax,
                  0, short_options());
  });
  expect_codes(statuses, {{0, StatusCode::kPeerLost}, {2, StatusCode::kPeerLost}});
}

class BarrierKilled : public ::testing::TestWithParam<int> {};

// A barrier is only correct if nobody passes it without the dead rank, so every survivor
// fails: its successor with kPeerLost, others through the silence it leaves.
TEST_P(BarrierKilled, EverySurvivorFails) {
  const int n = GetParam();
  const int victim = n / 2;
  algorithms::MemoryFabric fabric(n);
  fabric.kill(victim);
  const auto options = short_options();
  const auto statuses = run_bounded(n, [&](int r) {
    if (r == victim) return error(StatusCode::kAborted, "dead");
    return barrier(fabric.link(r), options);
  });
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    EXPECT_TRUE(statuses[r].code() == StatusCode::kPeerLost ||
                statuses[r].code() == StatusCode::kTimedOut)
        << "rank " << r << describe(statuses);
  }
  EXPECT_EQ(statuses[(victim + 1) % n].code(), StatusCode::kPeerLost);
}

INSTANTIATE_TEST_SUITE_P(Worlds, BarrierKilled, ::testing::Values(2, 5, 16));

TEST(Fault, AllToAllKilledRankFailsEveryone) {
  constexpr int kWorld = 5;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.kill(3);
  std::vector<std::vector<std::uint8_t>> in(kWorld, std::vector<std::uint8_t>(kWorld * 9, 1));
  std::vector<std::vector<std::uint8_t>> out(kWorld, std::vector<std::uint8_t>(kWorld * 9));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == 3) return error(StatusCode::kAborted, "dead");
    return all_to_all(fabric.link(r), in[r].data(), out[r].data(), 9, DType::kUInt8,
                      short_options());
  });
  expect_codes(statuses, {{0, StatusCode::kPeerLost},
                          {1, StatusCode::kPeerLost},
                          {2, StatusCode::kPeerLost},
                          {4, StatusCode::kPeerLost}});
}

TEST(Fault, GatherWithDeadRankFailsRoot) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.kill(2);
  std::vector<float> in(10, 1.0f);
  std::vector<float> out(10 * kWorld);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == 2) return error(StatusCode::kAborted, "dead");
    return gather(fabric.link(r), in.data(), out.data(), 10, DType::kFloat32, 0, short_options());
  });
  expect_codes(statuses, {{0, StatusCode::kPeerLost}});
}

TEST(Fault, ScatterToDeadRankFailsRoot) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.kill(3);
  std::vector<float> in(10 * kWorld, 1.0f);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(10));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == 3) return error(StatusCode::kAborted, "dead");
    return scatter(fabric.link(r), in.data(), out[r].data(), 10, DType::kFloat32, 1,
                   short_options());
  });
  expect_codes(statuses, {{1, StatusCode::kPeerLost}, {0, StatusCode::kOk}, {2, StatusCode::kOk}});
}

// --- a rank frozen (SIGSTOP): nothing fails explicitly, deadlines must catch it ------

TEST(Fault, BroadcastFrozenRankTimesOutItsDownstream) {
  constexpr int kWorld = 5;
  const int victim = 2;
  algorithms::MemoryFabric fabric(kWorld);
  TriggerLink freezing(fabric.link(victim), 3, [&] { fabric.freeze(victim); });
  std::vector<std::uint16_t> in(kChainCount, 7);
  std::vector<std::vector<std::uint16_t>> out(kWorld, std::vector<std::uint16_t>(kChainCount));
  const auto options = short_options();
  const auto statuses = run_bounded(kWorld, [&](int r) {
    algorithms::Link& link = r == victim ? freezing : fabric.link(r);
    return broadcast(link, in.data(), out[r].data(), kChainCount, DType::kBFloat16, 0, options);
  });
  expect_codes(statuses, {{3, StatusCode::kTimedOut}, {4, StatusCode::kTimedOut}});
}

TEST(Fault, BarrierFrozenRankTimesOutEveryone) {
  constexpr int kWorld = 7;
  const int victim = 4;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.freeze(victim);
  const auto options = short_options();
  const auto statuses =
      run_bounded(kWorld, [&](int r) { return barrier(fabric.link(r), options); });
  for (int r = 0; r < kWorld; ++r) {
    if (r == victim) continue;  // it hears the others; what it does is irrelevant
    EXPECT_EQ(statuses[r].code(), StatusCode::kTimedOut) << "rank " << r << describe(statuses);
  }
}

TEST(Fault, ReduceFrozenRankTimesOutRoot) {
  constexpr int kWorld = 8;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.freeze(5);
  std::vector<float> in(33, 1.0f);
  std::vector<float> out(33);
  const auto options = short_options(kDefaultChunk);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return reduce(fabric.link(r), in.data(), out.data(), in.size(), DType::kFloat32, ReduceOp::kAvg,
                  0, options);
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimedOut) << describe(statuses);
}

// --- a broken link ---------------------------------------------------------------------

TEST(Fault, BroadcastFailedLinkIsPeerLost) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.fail_link(1, 2);
  std::vector<std::int8_t> in(kChainCount, 5);
  std::vector<std::vector<std::int8_t>> out(kWorld, std::vector<std::int8_t>(kChainCount));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return broadcast(fabric.link(r), in.data(), out[r].data(), kChainCount, DType::kInt8, 0,
                     short_options(16));
  });
  expect_codes(statuses, {{0, StatusCode::kOk},
                          {1, StatusCode::kPeerLost},
                          {2, StatusCode::kPeerLost},
                          {3, StatusCode::kTimedOut}});
}

TEST(Fault, AllToAllFailedLinkIsPeerLostOnBothEnds) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.fail_link(0, 1);
  std::vector<std::vector<std::int32_t>> in(kWorld, std::vector<std::int32_t>(kWorld * 3, 9));
  std::vector<std::vector<std::int32_t>> out(kWorld, std::vector<std::int32_t>(kWorld * 3));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return all_to_all(fabric.link(r), in[r].data(), out[r].data(), 3, DType::kInt32,
                      short_options());
  });
  expect_codes(statuses, {{0, StatusCode::kPeerLost},
                          {1, StatusCode::kPeerLost},
                          {2, StatusCode::kOk},
                          {3, StatusCode::kOk}});
}

TEST(Fault, BarrierFailedLinkIsPeerLost) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  fabric.fail_link(0, 1);
  const auto statuses =
      run_bounded(kWorld, [&](int r) { return barrier(fabric.link(r), short_options()); });
  expect_codes(statuses, {{0, StatusCode::kPeerLost}, {1, StatusCode::kPeerLost}});
  for (const Status& s : statuses) EXPECT_FALSE(s.is_ok()) << describe(statuses);
}

// --- ranks that disagree ---------------------------------------------------------------

TEST(Mismatch, AllToAllCountFailsEveryRank) {
  constexpr int kWorld = 5;
  const int odd_one = 3;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<std::vector<float>> in(kWorld, std::vector<float>(kWorld * 9, 1.0f));
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(kWorld * 9));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return all_to_all(fabric.link(r), in[r].data(), out[r].data(), r == odd_one ? 9 : 8,
                      DType::kFloat32, short_options());
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kMismatch) << "rank " << r << describe(statuses);
  }
}

TEST(Mismatch, BroadcastCountFailsTheDisagreeingRankAndBelow) {
  constexpr int kWorld = 5;
  const int odd_one = 2;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<float> in(kChainCount + 1, 2.0f);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(kChainCount + 1, -1.0f));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return broadcast(fabric.link(r), in.data(), out[r].data(),
                     r == odd_one ? kChainCount + 1 : kChainCount, DType::kFloat32, 0,
                     short_options());
  });
  expect_codes(statuses, {{0, StatusCode::kOk},
                          {1, StatusCode::kOk},
                          {odd_one, StatusCode::kMismatch},
                          {3, StatusCode::kTimedOut},
                          {4, StatusCode::kTimedOut}});
}

// Same byte count, different dtype: without Tag::check the bits would be taken as ints.
TEST(Mismatch, BroadcastDtypeOfSameSizeIsMismatchNotReinterpretation) {
  constexpr int kWorld = 3;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<float> in(100, 0.5f);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(100));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return broadcast(fabric.link(r), in.data(), out[r].data(), 100,
                     r == 1 ? DType::kInt32 : DType::kFloat32, 0, short_options(kDefaultChunk));
  });
  EXPECT_EQ(statuses[1].code(), StatusCode::kMismatch) << describe(statuses);
  EXPECT_FALSE(statuses[2].is_ok() && out[2] != in) << "rank 2 kept wrong data";
}

TEST(Mismatch, ReduceCountNeverYieldsAResultAtRoot) {
  constexpr int kWorld = 5;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<std::int32_t> in(kChainCount + 1, 1);
  std::vector<std::int32_t> out(kChainCount + 1, -1);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return reduce(fabric.link(r), in.data(), r == 0 ? out.data() : nullptr,
                  r == 3 ? kChainCount + 1 : kChainCount, DType::kInt32, ReduceOp::kSum, 0,
                  short_options());
  });
  // The chain runs 4 -> 3 -> 2 -> 1 -> 0: rank 3 rejects rank 4's chunks and so never
  // sends, and everyone toward the root hears nothing.
  expect_codes(statuses, {{3, StatusCode::kMismatch},
                          {2, StatusCode::kTimedOut},
                          {1, StatusCode::kTimedOut},
                          {0, StatusCode::kTimedOut}});
}

TEST(Mismatch, ReduceOpFailsRoot) {
  constexpr int kWorld = 3;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<float> in(10, 1.0f);
  std::vector<float> out(10);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return reduce(fabric.link(r), in.data(), out.data(), 10, DType::kFloat32,
                  r == 2 ? ReduceOp::kMax : ReduceOp::kSum, 0, short_options());
  });
  EXPECT_FALSE(statuses[0].is_ok()) << describe(statuses);
}

TEST(Mismatch, GatherCountFailsRoot) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<double> in(6, 1.0);
  std::vector<double> out(6 * kWorld);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return gather(fabric.link(r), in.data(), out.data(), r == 1 ? 6 : 5, DType::kFloat64, 0,
                  short_options());
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kMismatch) << describe(statuses);
}

TEST(Mismatch, ZeroAgainstNonzeroCountIsCaught) {
  constexpr int kWorld = 4;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<float> in(100, 3.0f);
  std::vector<std::vector<float>> out(kWorld, std::vector<float>(100));
  const auto statuses = run_bounded(kWorld, [&](int r) {
    return broadcast(fabric.link(r), in.data(), out[r].data(), r == 1 ? 0 : 100, DType::kFloat32, 0,
                     short_options(kDefaultChunk));
  });
  EXPECT_EQ(statuses[1].code(), StatusCode::kMismatch) << describe(statuses);
}

TEST(Mismatch, BarrierAgainstBroadcastWithSameSeqIsCaught) {
  constexpr int kWorld = 2;
  algorithms::MemoryFabric fabric(kWorld);
  std::vector<std::uint8_t> buf(0);
  const auto statuses = run_bounded(kWorld, [&](int r) {
    if (r == 0) return barrier(fabric.link(r), short_options());
    return broadcast(fabric.link(r), buf.data(), buf.data(), 0, DType::kUInt8, 0, short_options());
  });
  EXPECT_EQ(statuses[1].code(), StatusCode::kMismatch) << describe(statuses);
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimedOut) << describe(statuses);
}

}  // namespace
}  // namespace tributary::testing
