// Federated rounds (docs/federated.md): a weighted aggregation with a deadline. The types
// of Worker::federated_round; a light header (worker.h includes it).
//
// A member calls federated_round(data, count, round) with its update and weight. The
// coordinator is the round's clock: it opens the round at the first member's call and
// closes it when every member of the view is ready or `deadline` after the opening. The
// members ready by then are the contributors: they compute, among themselves only,
//     data = sum_i(w_i * x_i) / sum_i(w_i)
// the same bits on every contributor, and commit it all-or-nothing. A member whose call
// reaches the round after it closed is late: it stays a member, its call returns at once
// with contributed = false and `data` untouched, and its update is folded into its
// residual for `tensor_id` (contributed with its next round) or dropped. Fewer
// contributors than min_participants: the round fails on every member with
// kRoundFailed, and nothing (inputs, residuals) changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace tributary::agent {

enum class LatePolicy : std::uint8_t {
  kFoldIntoResidual,  // a late update is added into residual[tensor_id], sent next round
  kDrop,              // a late update is forgotten
};

struct FederatedRound {
  std::uint64_t round = 0;  // equal on every member, increasing (e.g. the round counter)
  double weight = 1.0;      // > 0 and finite (<= 1e15): this member's weight (sample count)
  // From the round's opening (its first contribution at the coordinator); the opener's
  // value is the round's.
  std::chrono::milliseconds deadline{10000};
  int min_participants = 1;  // fewer contributors by the deadline: the round fails for everyone
  LatePolicy late = LatePolicy::kFoldIntoResidual;
  std::uint64_t tensor_id = 0;  // key of the residual a late contribution is folded into
};

struct Contribution {
  std::uint64_t member_id = 0;
  double weight = 0;
};

struct FederatedOutcome {
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;                 // the view whose contributors produced the result
  bool contributed = false;                // false: this member was late; `data` is untouched
  std::vector<Contribution> contributors;  // who is in the result, with what weight, by rank
  double total_weight = 0;
  int attempts = 1;  // 1 + re-runs after a contributor failed mid-round
};

}  // namespace tributary::agent
