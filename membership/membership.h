// The coordinator's membership decisions, as pure single-threaded code.
//
// Events go in (join, leave, heartbeat, removal, the passage of time) with the current
// time passed as an argument; decisions come out (who was removed and why, the new view
// to broadcast). Nothing here touches a socket, a thread or a clock, so every rule can be
// tested by hand-driven time (tests/membership/). The coordinator service
// (coordinator/) owns the sockets and carries decisions out.
//
// Rules this class guarantees:
//  - No view is issued until `initial_world_size` members have joined. From then on,
//    every change (join, leave, removal) issues exactly one new view, and several
//    removals found by one tick() are batched into one view.
//  - Epochs strictly increase: each view's epoch is the previous one + 1, starting after
//    `config.last_epoch` (so a restarted coordinator that journals its epoch never reuses
//    one).
//  - Member ids are never reused (they continue after `config.last_member_id`).
//  - Ranks follow the ring order. The ring is sorted by (zone, host, join order): members
//    of one host are adjacent, hosts of one zone are adjacent (so a ring crosses a zone
//    boundary as few times as possible), and ties keep join order, which makes the
//    order stable: a change never reorders the members that stayed.
//  - A member whose last heartbeat (or join) is more than `heartbeat_timeout` before
//    `now` is removed by tick(now) with reason kHeartbeatTimeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "membership/view.h"

namespace tributary::membership {

struct MembershipConfig {
  std::size_t initial_world_size = 1;  // members needed before the first view
  Duration heartbeat_timeout = std::chrono::seconds(5);
  std::size_t max_members = 4096;      // joins beyond this are refused
  Epoch last_epoch = 0;                // the first view gets last_epoch + 1
  MemberId last_member_id = 0;         // the first member gets last_member_id + 1
};

// What a joiner says about itself (validated by the caller before join()).
struct MemberLabels {
  std::string name;          // for logs
  std::string host;
  std::string zone;
  std::string data_address;  // "host:port"
  std::vector<std::string> capabilities;
};

enum class PeerPhase : std::uint8_t {
  kWaiting,  // joined, but the initial world is not complete: in no view yet
  kInView,   // part of the current view
};

// Everything the coordinator knows about one member: one record, not parallel maps.
struct PeerState {
  MemberId id = 0;
  MemberLabels labels;
  PeerPhase phase = PeerPhase::kWaiting;
  TimePoint joined_at{};
  TimePoint last_heartbeat{};  // the join counts as the first heartbeat
  Epoch known_epoch = 0;       // latest epoch the member reported
  std::uint64_t step = 0;      // latest step the member reported
};

enum class RemovalReason : std::uint8_t {
  kLeft,              // the member asked to leave
  kHeartbeatTimeout,  // silent for longer than heartbeat_timeout
  kMalformed,         // sent bytes that do not decode, or broke the protocol
};
std::string_view to_string(RemovalReason reason);  // "left", "heartbeat_timeout", "malformed"

struct Removal {
  MemberId id = 0;
  RemovalReason reason = RemovalReason::kLeft;
  std::string name;  // the member's name, for logs
};

// What the caller must carry out, in this order: tell each removed member it is out,
// then send `new_view` (if any) to every member in it.
struct Decisions {
  std::vector<Removal> removed;
  std::optional<View> new_view;

  bool empty() const { return removed.empty() && !new_view; }
};

struct JoinDecision {
  MemberId id = 0;
  Decisions decisions;  // new_view, when present, includes the joiner
};

struct HeartbeatDecision {
  bool known = false;       // false: not a member (removed or never joined)
  Epoch current_epoch = 0;
  bool resend_view = false; // the member reported an older epoch than its current view
};

class Membership {
 public:
  explicit Membership(MembershipConfig config);

  // kUnavailable when max_members are already in.
  Result<JoinDecision> join(MemberLabels labels, TimePoint now);
  // Unknown ids are ignored (empty Decisions): a leave may race a timeout.
  Decisions leave(MemberId id, TimePoint now);
  Decisions remove(MemberId id, RemovalReason reason, TimePoint now);
  HeartbeatDecision heartbeat(MemberId id, Epoch known_epoch, std::uint64_t step, TimePoint now);
  // Removes every member silent for longer than heartbeat_timeout.
  Decisions tick(TimePoint now);

  // The earliest time at which tick() could remove someone; TimePoint::max() if nobody.
  TimePoint next_expiry() const;
  // The latest issued view (epoch 0 and empty before the first one).
  const View& view() const { return view_; }
  Epoch epoch() const { return view_.epoch; }
  std::size_t size() const { return peers_.size(); }
  const PeerState* find(MemberId id) const;
  const std::map<MemberId, PeerState>& peers() const { return peers_; }
  const MembershipConfig& config() const { return config_; }

 private:
  Decisions remove_all(const std::vector<std::pair<MemberId, RemovalReason>>& gone);
  // Issues a new view if the initial world is (or was) complete.
  std::optional<View> maybe_issue_view();
  View build_view(Epoch epoch) const;

  MembershipConfig config_;
  std::map<MemberId, PeerState> peers_;  // ordered: deterministic iteration
  View view_;
  Epoch last_epoch_;
  MemberId last_id_;
  bool first_view_issued_ = false;
};

}  // namespace tributary::membership
