// PairRouteLink (transport/pair_route_link.h) over two in-memory paths, ranks as threads:
// four ranks on two "hosts", path 0 carrying only the pairs inside a host and silent
// between hosts (a pair that used it there would wait for its deadline), path 1 every
// pair. Every algorithm gives the bits of a plain link.
#include "transport/pair_route_link.h"

#include "transport/failover_link.h"
#include "transport/path_peers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/support/fault_path.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using algorithms::AllReduceAlgorithm;
using algorithms::MemoryFabric;
using algorithms::PollableLink;
using testing::FaultPath;

constexpr int kRanks = 4;
bool same_host(int a, int b) { return a / 2 == b / 2; }

std::vector<float> inputs(int rank, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(77 + rank));
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

algorithms::CollectiveOptions options_for(AllReduceAlgorithm algorithm) {
  algorithms::CollectiveOptions o;
  o.seq = 5;
  o.algorithm = algorithm;
  o.chunk_bytes = 512;
  o.deadline = Deadline::after(std::chrono::seconds(20));
  return o;
}

transport::PairRouteParams two_hosts_params(int rank) {
  transport::PairRouteParams params;
  params.path_peers.assign(2, std::vector<bool>(kRanks, true));
  for (int peer = 0; peer < kRanks; ++peer) {
    params.path_peers[0][static_cast<std::size_t>(peer)] = same_host(rank, peer);
  }
  return params;
}

TEST(PairRouteLink, EachPairOnItsPathWithThePlainLinksBits) {
  constexpr std::size_t kCount = 3001;
  const AllReduceAlgorithm algorithms[] = {
      AllReduceAlgorithm::kRing, AllReduceAlgorithm::kTree, AllReduceAlgorithm::kDoubleTree,
      AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kDirect};
  for (AllReduceAlgorithm algorithm : algorithms) {
    for (bool combining : {false, true}) {
      const std::string what = std::string(to_string(algorithm)) + (combining ? " combining" : "");
      std::vector<std::vector<float>> expected(kRanks, std::vector<float>(kCount));
      {
        MemoryFabric plain(kRanks);
        plain.set_combining(combining);
        const auto st = testing::run_ranks(kRanks, [&](int r) {
          const auto in = inputs(r, kCount);
          return all_reduce(plain.link(r), in.data(), expected[static_cast<std::size_t>(r)].data(),
                            kCount, DType::kFloat32, ReduceOp::kSum, options_for(algorithm));
        });
        for (const Status& s : st) ASSERT_TRUE(s.is_ok()) << what << ": " << s.to_string();
      }
      MemoryFabric inside(kRanks), across(kRanks);
      inside.set_combining(combining);
      across.set_combining(combining);
      for (int a = 0; a < kRanks; ++a) {
        for (int b = a + 1; b < kRanks; ++b) {
          if (!same_host(a, b)) inside.silence_link(a, b);
        }
      }
      std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount));
      std::vector<int> inside_sends(kRanks, 0);
      const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
        std::vector<std::unique_ptr<PollableLink>> paths;
        auto first = std::make_unique<FaultPath>(inside.pollable(r));
        FaultPath* counted = first.get();
        paths.push_back(std::move(first));
        paths.push_back(std::make_unique<FaultPath>(across.pollable(r)));
        TRIB_ASSIGN_OR_RETURN(
            auto link, transport::make_pair_route_link(two_hosts_params(r), std::move(paths)));
        if (link->combines() != combining) return error(StatusCode::kInternal, "combines()");
        const auto in = inputs(r, kCount);
        Status st = all_reduce(*link, in.data(), out[static_cast<std::size_t>(r)].data(), kCount,
                               DType::kFloat32, ReduceOp::kSum, options_for(algorithm));
        inside_sends[static_cast<std::size_t>(r)] = counted->sends();
        return st;
      });
      for (int r = 0; r < kRanks; ++r) {
        const auto i = static_cast<std::size_t>(r);
        ASSERT_TRUE(statuses[i].is_ok())
            << what << ": rank " << r << ": " << statuses[i].to_string();
        EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), kCount * sizeof(float)), 0)
            << what << ": rank " << r << " differs from a plain link";
      }
      // The pairs inside a host did use path 0 (every algorithm talks to the neighbour).
      EXPECT_GT(inside_sends[0] + inside_sends[1], 0) << what;
    }
  }
}

// Only where every path in use combines does the link say it combines.
TEST(PairRouteLink, CombinesOnlyWhereEveryPathInUseDoes) {
  MemoryFabric inside(kRanks), across(kRanks);
  inside.set_combining(true);
  across.set_combining(false);
  std::vector<std::unique_ptr<PollableLink>> paths;
  paths.push_back(std::make_unique<FaultPath>(inside.pollable(0)));
  paths.push_back(std::make_unique<FaultPath>(across.pollable(0)));
  auto link = transport::make_pair_route_link(two_hosts_params(0), std::move(paths));
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  EXPECT_FALSE((*link)->combines());
}

// A pair that no path carries is refused when either multi-path link is made, not found at
// its first message; so is a routing link of one path.
TEST(PairRouteLink, APairWithoutAPathOrASinglePathIsRefused) {
  MemoryFabric a(3), b(3);
  const transport::PathPeers no_rank_2 = {{false, true, false}, {false, true, false}};
  auto two_paths = [&] {
    std::vector<std::unique_ptr<PollableLink>> paths;
    paths.push_back(std::make_unique<FaultPath>(a.pollable(0)));
    paths.push_back(std::make_unique<FaultPath>(b.pollable(0)));
    return paths;
  };
  transport::PairRouteParams route;
  route.path_peers = no_rank_2;
  transport::FailoverParams failover;
  failover.path_peers = no_rank_2;
  for (const Status& st : {transport::make_pair_route_link(route, two_paths()).status(),
                           transport::make_failover_link(failover, two_paths()).status()}) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("carries rank 2"), std::string::npos) << st.to_string();
  }
  std::vector<std::unique_ptr<PollableLink>> one;
  one.push_back(std::make_unique<FaultPath>(a.pollable(0)));
  EXPECT_EQ(transport::make_pair_route_link({}, std::move(one)).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
