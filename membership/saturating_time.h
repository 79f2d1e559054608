// Time arithmetic that saturates at TimePoint::max() ("never"), for the membership logic's
// deadlines. Private to membership/.
#pragma once

#include "core/clock.h"

namespace tributary::membership {

// t + d without overflowing past TimePoint::max().
inline TimePoint saturating_add(TimePoint t, Duration d) {
  return t >= TimePoint::max() - d ? TimePoint::max() : t + d;
}

}  // namespace tributary::membership
