// torch.distributed ranks and Tributary ranks are two numberings of the same members:
// torch's come from its rendezvous (the launcher), Tributary's from the coordinator's view
// (by zone, host and join order). The backend exchanges them once through torch's store and
// translates roots and block orders with this map. Pure: no torch, no sockets.
#pragma once

#include <vector>

#include "core/status.h"

namespace tributary::python::torch_backend {

class RankMap {
 public:
  // worker_rank_of[t]: the Tributary rank of the member whose torch rank is t. kInvalidArgument
  // unless it is a permutation of 0..n-1.
  static Result<RankMap> from_worker_ranks(std::vector<int> worker_rank_of);

  int size() const { return static_cast<int>(worker_of_.size()); }
  int worker_rank(int torch_rank) const { return worker_of_.at(torch_rank); }
  int torch_rank(int worker_rank) const { return torch_of_.at(worker_rank); }
  bool identity() const { return identity_; }

 private:
  std::vector<int> worker_of_;
  std::vector<int> torch_of_;
  bool identity_ = true;
};

}  // namespace tributary::python::torch_backend
