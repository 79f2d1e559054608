// Incremental views: a view told as its difference from an earlier one.
//
// At 4,096 members a whole view is 170 KB; sent to every member at every change it is
// 700 MB per view change (bench/results/coordinator_scale_2026-11-23b.md). A member that
// holds the previous view needs only who left and who came: a ViewDelta.
//
// What a delta guarantees:
//  - apply_delta(base, delta) with base.epoch == delta.base_epoch rebuilds exactly the
//    view the coordinator issued (operator== equal), or fails: the delta carries the
//    view's digest (view_digest) and apply_delta checks it. Any other base is refused.
//  - The rebuild relies on one property of the ring order (membership.h): members that
//    stay keep their relative order. Joiners carry their ranks; the survivors fill the
//    other ranks in their old order. make_delta() applies the delta it made and returns
//    nullopt unless that gives `next` exactly, so an ordering that ever breaks the
//    property (or a survivor whose labels changed) sends full views, not wrong ones.
//  - Nothing here allocates more than the base view plus the delta's own entries.
// Pure code: no protobuf (control/codec.h has the wire form), no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "membership/view.h"

namespace tributary::membership {

struct ViewDelta {
  Epoch epoch = 0;       // the view it builds
  Epoch base_epoch = 0;  // the view it applies to
  std::vector<MemberId> removed;  // members of the base that are not in the view
  std::vector<ViewMember> added;  // members not in the base, with their ranks, by rank
  std::uint32_t size = 0;         // members in the view it builds
  std::uint64_t digest = 0;       // view_digest() of the view it builds
  bool leaves_only = false;       // View::leaves_only of the view it builds

  friend bool operator==(const ViewDelta&, const ViewDelta&) = default;
};

// The first 8 bytes of SHA-256 over every field of `view` (epoch, each member's id, rank,
// labels and capabilities, the ring), length-prefixed so no two views share an input.
std::uint64_t view_digest(const View& view);

// The delta from `base` to `next`; nullopt when it would not rebuild `next` exactly (see
// above), when `next` is not newer, or when `base` is empty (a delta would be the view).
std::optional<ViewDelta> make_delta(const View& base, const View& next);

// The view `delta` builds on `base`. kStaleEpoch when base.epoch is not delta.base_epoch;
// kBadFrame when the delta does not fit the base (a removed id not in it, an added id
// already in it, a size or rank that does not add up) or the result's digest differs.
Result<View> apply_delta(const View& base, const ViewDelta& delta);

}  // namespace tributary::membership
