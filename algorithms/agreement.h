// The commit round the runtime runs after a collective's data phase
// (docs/fault-tolerance.md, "Fast path: the agreement round").
//
// A member that completes it knows that every member of the link finished the data phase
// of the collective, i.e. holds the full result, so it may commit on its own; a member
// whose round fails holds its result uncommitted and lets the coordinator decide. The
// round carries no data: empty messages tagged with options.seq (the caller puts it in
// SeqSpace::kAgreement so it never matches a caller's collective).
//
// Up to kDirectAgreementMax members it is one direct round: an empty message to and from
// every peer, one round trip, which beats a log2(n)-round barrier while wake-ups dominate
// (small groups). Larger groups run the dissemination barrier (barrier()), which sends
// n log2(n) messages instead of n(n-1).
//
// Errors follow collectives.h: the first error is returned and the link aborted.
#pragma once

#include "algorithms/collectives.h"

namespace tributary::algorithms {

inline constexpr int kDirectAgreementMax = 8;

Status agreement_round(Link& link, const CollectiveOptions& options);

}  // namespace tributary::algorithms
