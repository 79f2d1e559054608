// What each member brings to a step boundary (Worker::step_boundary), and what the members
// agree on: every member encodes its vote, one int64 all-reduce with max combines them, and
// every member that returns the boundary decodes the same agreement. Pure.
//
// The fields are chosen so that max is the agreement the boundary needs:
//  - any member draining, any member seeing joiners wait, any member needing the state:
//    max of 0/1;
//  - the newest view epoch any member has seen (not a "newer view" bit: when the all-reduce
//    fails and run() re-runs it in the view it moved to, a bit computed before would still
//    ask every member to move on, to a view nobody has asked for);
//  - the cost model's refit (cost_refit.h): alpha in ns and beta in fs per byte, encoded
//    negated, so that max is the smallest fit, and "no fit" (0) from any member means no
//    refit for anyone.
#pragma once

#include <array>
#include <cstdint>

#include "membership/view.h"

namespace tributary::agent {

struct BoundaryVote {
  bool leave = false;            // this member drains (agreed: some member does)
  bool joiners_waiting = false;  // the coordinator has joiners waiting
  membership::Epoch newest_epoch = 0;
  bool state_needed = false;  // this member must receive the training state
  // This member's refit of the cost model: both > 0, or both 0 (no fit). Agreed: the
  // smallest of each over the members, or 0 when any member has none.
  std::int64_t refit_alpha_ns = 0;
  std::int64_t refit_beta_fs = 0;

  static constexpr std::size_t kFields = 6;
  using Encoded = std::array<std::int64_t, kFields>;

  bool has_refit() const { return refit_alpha_ns > 0 && refit_beta_fs > 0; }

  Encoded encode() const {
    const bool refit = has_refit();
    return {leave ? 1 : 0,
            joiners_waiting ? 1 : 0,
            static_cast<std::int64_t>(newest_epoch),
            state_needed ? 1 : 0,
            refit ? -refit_alpha_ns : 0,
            refit ? -refit_beta_fs : 0};
  }

  // The agreement from the all-reduced (max) encodings.
  static BoundaryVote decode(const Encoded& e) {
    BoundaryVote v;
    v.leave = e[0] != 0;
    v.joiners_waiting = e[1] != 0;
    v.newest_epoch = static_cast<membership::Epoch>(e[2]);
    v.state_needed = e[3] != 0;
    if (e[4] < 0 && e[5] < 0) {
      v.refit_alpha_ns = -e[4];
      v.refit_beta_fs = -e[5];
    }
    return v;
  }
};

}  // namespace tributary::agent
