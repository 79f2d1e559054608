#include "python/torch_backend/rank_map.h"

#include <string>

namespace tributary::python::torch_backend {

Result<RankMap> RankMap::from_worker_ranks(std::vector<int> worker_rank_of) {
  const int n = static_cast<int>(worker_rank_of.size());
  RankMap map;
  map.torch_of_.assign(worker_rank_of.size(), -1);
  for (int t = 0; t < n; ++t) {
    const int w = worker_rank_of[t];
    if (w < 0 || w >= n || map.torch_of_[w] != -1) {
      return error(StatusCode::kInvalidArgument,
                   "torch rank " + std::to_string(t) + " reported Tributary rank " +
                       std::to_string(w) + ", which is out of range or taken, among " +
                       std::to_string(n) + " members");
    }
    map.torch_of_[w] = t;
    map.identity_ = map.identity_ && w == t;
  }
  map.worker_of_ = std::move(worker_rank_of);
  return map;
}

}  // namespace tributary::python::torch_backend
