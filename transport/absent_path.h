// A failover path that never connected: every operation on it fails at once with the
// reason it is absent. A group whose members all advertise a standby path runs the
// failover protocol on every member even where that standby did not connect, with this
// in its place: whether a member speaks the protocol (descriptors, acknowledgements) on
// its preferred path then depends only on the view, never on which connections happened
// to succeed, so two ends of a pair always agree (transport/failover_link.h). The agent
// puts a TCP link without connections there instead, whose pairs are re-dialled
// (agent/data_plane.h); this is the path where even that cannot be had.
#pragma once

#include <memory>
#include <string>

#include "algorithms/pollable_link.h"
#include "core/status.h"

namespace tributary::transport {

// `rank` of `size`; `reason`: why the path is absent (an error; the pairs' logs say it).
std::unique_ptr<algorithms::PollableLink> make_absent_path(int rank, int size, Status reason);

}  // namespace tributary::transport
