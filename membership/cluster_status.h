// What `tributary status` shows: the coordinator's knowledge of its cluster at one moment,
// as plain C++. The coordinator builds it (coordinator/status_report.h), the control plane
// carries it (control/status_codec.h: StatusReport in control.proto), the CLI prints it
// (cli/status_format.h). Read-only: building or fetching one changes nothing.
//
// Bounded: at most kMaxStatusMembers members in detail (the rest are counted in
// members_omitted), kMaxStatusHistory view changes, kMaxChangeMembers names per change;
// links list every peer up to kMaxFullLinkMembers members, ring neighbours above (so at
// most kMaxStatusLinks in all).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "membership/view.h"

namespace tributary::membership {

inline constexpr std::size_t kMaxStatusMembers = 1024;
inline constexpr std::size_t kMaxStatusHistory = 32;
inline constexpr std::size_t kMaxChangeMembers = 16;
inline constexpr std::size_t kMaxFullLinkMembers = 32;
inline constexpr std::size_t kMaxStatusLinks = 2 * kMaxStatusMembers;

// How a member reaches one peer: as the member reported it (source "agent": the path its
// pair is on, shared memory, RDMA, TCP or a standby, with the pair's path list and its
// moves), or, until it has reported for the current epoch, inferred by the coordinator
// from the view (source "view": TCP to the peer's data address).
inline constexpr std::size_t kMaxLinkPaths = 8;
inline constexpr std::size_t kMaxPathNameBytes = 32;   // "tcp-standby-2"
inline constexpr std::size_t kMaxLastMoveBytes = 96;   // "tcp-standby -> tcp (recovered)"
struct LinkPath {
  MemberId peer = 0;
  std::string transport;  // the path in use: "tcp", "shm", "rdma", "tcp-standby", ...
  std::string address;    // where the link goes: "host:port" for TCP
  std::string source;     // "view" (inferred by the coordinator) or "agent" (reported)
  std::vector<std::string> paths;  // the pair's paths, most preferred first (at most 8)
  std::uint32_t moves = 0;         // moves between them in the current epoch
  std::string last_move;           // the last one, "from -> to (cause)"; "" for none

  friend bool operator==(const LinkPath&, const LinkPath&) = default;
};

struct MemberStatus {
  MemberId id = 0;
  std::string name;
  std::string host;
  std::string zone;
  std::string data_address;
  // "in_view", "suspect" (in the view, silent for longer than the suspect threshold),
  // "pending" (joiner waiting for a step boundary), "waiting" (joined, no view issued
  // yet: the cluster is forming), "resuming" (journaled member a restarted coordinator
  // has not heard from yet).
  std::string state;
  bool in_view = false;
  std::uint32_t rank = 0;  // meaningful when in_view
  Epoch known_epoch = 0;   // the latest epoch it reported
  std::uint64_t step = 0;  // the latest step it reported (collective sequence number)
  std::int64_t heartbeat_age_ms = 0;
  // Means over its last `timed_steps` step reports: boundary to boundary, computing, and
  // the rest of the step (collectives and waiting for peers).
  std::uint32_t timed_steps = 0;
  double step_seconds = 0;
  double compute_seconds = 0;
  double collective_seconds = 0;
  // Its compute time over the median of the latest step every member of the view
  // reported (1: the median; the policy's threshold is straggler_k); 0: no such step.
  double straggler_score = 0;
  std::uint32_t straggling_steps = 0;  // of its last straggler_window evaluated steps
  std::vector<LinkPath> links;

  friend bool operator==(const MemberStatus&, const MemberStatus&) = default;
};

struct MemberRef {
  MemberId id = 0;
  std::string name;
  std::string reason;  // for removals: "heartbeat_timeout", "left", ...
  // For a confirmed failure: the name of the member whose report the coordinator confirmed
  // (who noticed first); empty when the coordinator noticed the silence by itself.
  std::string noticed_by;

  friend bool operator==(const MemberRef&, const MemberRef&) = default;
};

struct ViewChange {
  Epoch epoch = 0;
  std::string cause;  // membership::to_string(ViewCause)
  std::int64_t unix_ms = 0;
  std::uint32_t size = 0;
  std::vector<MemberRef> joined;   // at most kMaxChangeMembers ...
  std::vector<MemberRef> removed;  // ...
  std::uint32_t omitted = 0;       // ... the rest counted here
  bool from_journal = false;       // recorded by an earlier coordinator process

  friend bool operator==(const ViewChange&, const ViewChange&) = default;
};

struct ClusterStatus {
  std::uint64_t instance_id = 0;  // random per coordinator process
  std::int64_t unix_ms = 0;       // the coordinator's wall clock when it answered
  std::int64_t uptime_ms = 0;
  // "forming" (no view until `world_size` members wait: none yet, or the world emptied and
  // the coordinator serves jobs), "empty" (the world formed and every member left: joiners
  // are admitted one at a time), "resuming" (restarted, waiting for journaled members),
  // "changing" (a view was issued, not every member confirmed it yet), "steady".
  std::string phase;
  Epoch epoch = 0;
  std::uint32_t world_size = 0;  // members needed before the first view
  std::int64_t heartbeat_interval_ms = 0;
  std::int64_t heartbeat_timeout_ms = 0;
  std::int64_t suspect_after_ms = 0;  // heartbeat age that makes a member a suspect
  double straggler_k = 0;
  std::uint32_t straggler_m = 0;
  std::uint32_t straggler_window = 0;
  std::vector<MemberStatus> members;  // the view by rank, then the others by id
  std::uint32_t members_omitted = 0;
  std::string links_scope;  // "all_peers" or "ring_neighbours"
  std::uint32_t handshakes_open = 0;
  std::vector<ViewChange> history;  // oldest first
  // Not on the wire: filled by the client when the coordinator it asked was a standby
  // (replicated coordinators) that named the leader, who answered this report.
  std::string asked_standby;  // the standby's endpoint; empty: the one asked answered
  std::string answered_by;    // the leader's endpoint, when asked_standby is set

  friend bool operator==(const ClusterStatus&, const ClusterStatus&) = default;
};

}  // namespace tributary::membership
