// The torch backend's rank translation (python/torch_backend/rank_map.h): permutations are
// accepted both ways round, anything else is refused with the offending rank named.
#include "python/torch_backend/rank_map.h"

#include <gtest/gtest.h>

namespace tributary::python::torch_backend {
namespace {

TEST(RankMap, TranslatesBothWays) {
  auto map = RankMap::from_worker_ranks({2, 0, 3, 1});
  ASSERT_TRUE(map.is_ok()) << map.status().to_string();
  EXPECT_EQ(map->size(), 4);
  EXPECT_FALSE(map->identity());
  for (int t = 0; t < 4; ++t) EXPECT_EQ(map->torch_rank(map->worker_rank(t)), t);
  EXPECT_EQ(map->worker_rank(0), 2);
  EXPECT_EQ(map->torch_rank(2), 0);
}

TEST(RankMap, KnowsTheIdentity) {
  for (int n = 1; n <= 8; ++n) {
    std::vector<int> ranks(n);
    for (int i = 0; i < n; ++i) ranks[i] = i;
    auto map = RankMap::from_worker_ranks(ranks);
    ASSERT_TRUE(map.is_ok());
    EXPECT_TRUE(map->identity());
  }
}

TEST(RankMap, RefusesWhatIsNotAPermutation) {
  for (const auto& bad : std::vector<std::vector<int>>{{0, 0}, {0, 2}, {-1, 0}, {1, 1, 0}}) {
    auto map = RankMap::from_worker_ranks(bad);
    ASSERT_FALSE(map.is_ok());
    EXPECT_EQ(map.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(map.status().message().find("torch rank"), std::string::npos);
  }
}

}  // namespace
}  // namespace tributary::python::torch_backend
