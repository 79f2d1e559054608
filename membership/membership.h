// The coordinator's membership decisions, as pure single-threaded code.
//
// Events go in (join, leave, heartbeat, removal, the passage of time) with the current
// time passed as an argument; decisions come out (who was removed and why, the new view
// to broadcast). Nothing here touches a socket, a thread or a clock, so every rule can be
// tested by hand-driven time (tests/membership/). The coordinator service
// (coordinator/) owns the sockets and carries decisions out.
//
// Rules this class guarantees (docs/fault-tolerance.md is the protocol):
//  - No view is issued until `initial_world_size` members have joined (again after the world
//    emptied, with `reform_when_empty`). After the first
//    view, joiners wait (phase kPending, announced by HeartbeatDecision::joiners_pending)
//    until a step boundary: once every member of the current epoch sent a boundary
//    request (or `boundary_timeout` passed: the silent ones are removed as failed), ONE
//    view is issued with the leavers removed and the pending joiners added. When the
//    current view is empty, joiners are admitted at once.
//  - Every other change (leave, removal) issues exactly one new view without joiners, and
//    several removals found by one tick() are batched into one view.
//  - After every view, each member must report Ready within `ready_timeout` (the silent
//    are removed, which issues the next view; the timeout is enforced once somebody is
//    waiting for Go, i.e. sent Ready, so agents that never speak Ready/Go are left
//    alone); once all did, one Go goes to all of them,
//    with commit_through (membership/commit_rule.h) over the members that were in the
//    last started (Go'd) view, the joiners (members of no started view; none on a fresh
//    start) and state_source (the lowest-rank member of the last started view).
//  - Failure reports about the current epoch are confirmed when the suspect (any member
//    for suspect 0) is silent for more than `confirm_silence` (scaled with the heartbeat
//    pace), or did not answer a probe sent `confirm_silence` (unscaled) ago, re-checked on
//    every tick; confirmed suspects are removed at once. A report asks for a probe
//    (Decisions::probe: every member of the view is asked to heartbeat at once) unless
//    one went out within `confirm_silence`: however slow the pace, a reported failure is
//    confirmed within `confirm_silence` of the report. A report that cannot be confirmed within
//    `heartbeat_timeout` while its reporter is alive means the epoch's links are broken:
//    a new view with the same members follows (a fresh epoch rebuilds the links). A
//    report naming a suspect outside the view, or its own reporter, is refused.
//  - A Ready round that waits on a member silent for more than `confirm_silence` while
//    others are Ready confirms that member failed (two members killed at once: the view
//    that removes the first still holds the second, and everyone waits for its Ready).
//  - Step timings feed the straggler policy (membership/straggler_policy.h): one timing
//    per member and step (a repeated or older step is refused), and a member's first
//    timing after it entered a view is not judged (it spans the join, not compute). An
//    evicted straggler cannot join again (by name) before the cool-down.
//  - Claims from members are checked against what the coordinator knows: a Ready whose
//    seqs no honest member could report is left out of the commit decision
//    (commit_rule.h), a heartbeat naming an epoch never issued is not believed. Every
//    refusal is listed in Decisions::refused (HeartbeatDecision::refused), for the log.
//  - After a coordinator restart, restore() lists the journaled members as kResuming;
//    the first view (epoch > journaled) is issued once all resumed or `resume_timeout`
//    passed, with those that resumed.
//  - Epochs strictly increase: each view's epoch is the previous one + 1, starting after
//    `config.last_epoch` (so a restarted coordinator that journals its epoch never reuses
//    one).
//  - Member ids are never reused (they continue after `config.last_member_id`).
//  - Ranks follow the ring order. The ring is sorted by (zone, host, join order): members
//    of one host are adjacent, hosts of one zone are adjacent (so a ring crosses a zone
//    boundary as few times as possible), and ties keep join order, which makes the
//    order stable: a change never reorders the members that stayed.
//  - A member whose last heartbeat (or join) is more than `heartbeat_timeout` (scaled
//    with the heartbeat pace) before `now` is removed by tick(now) with reason
//    kHeartbeatTimeout.
//  - The heartbeat pace (membership/heartbeat_pace.h): members are asked to heartbeat
//    every heartbeat_interval() = max(config.heartbeat_interval, size / max_heartbeat_rate),
//    and silences are judged by the same factor.
//  - A heartbeat naming an older epoch than a view member's current view asks for the
//    view again (HeartbeatDecision::resend_view) only when the view went to that member
//    at least kViewResendAfter heartbeat intervals ago (or never: it reconnected), so a
//    heartbeat sent while the push was on its way asks for no second copy. At 4,096
//    members a push is 4,096 copies of a 170 KB view and takes seconds to deliver; a
//    resend per stale heartbeat multiplied that (bench/results/
//    coordinator_scale_2026-11-23b.md). A heartbeat with want_view (the member could
//    not apply a ViewDelta) gets the view at once.
//  - PeerState::known_epoch is the latest epoch a member reported in a heartbeat or a
//    Ready: the coordinator sends an incremental view to the members whose known_epoch is
//    the delta's base (membership/view_delta.h), the whole view to the others.
//  - Per-message work is O(log n) and a tick() that decides nothing is O(1) (plus the
//    open failure suspicions): the heartbeat timeout is swept only when the oldest
//    heartbeat can have expired.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <deque>

#include "core/clock.h"
#include "core/status.h"
#include "membership/commit_rule.h"
#include "membership/heartbeat_pace.h"
#include "membership/straggler_policy.h"
#include "membership/view.h"

namespace tributary::membership {

struct MembershipConfig {
  std::size_t initial_world_size = 1;  // members needed before the first view
  // A world that empties (its last member left or was removed) forms again like the first:
  // the next joiners wait until initial_world_size of them are there (a coordinator serving
  // one job after another). Off: joiners into an empty world are admitted at once.
  bool reform_when_empty = false;
  Duration heartbeat_timeout = std::chrono::seconds(1);
  // The heartbeat budget (membership/heartbeat_pace.h): the interval members are asked for
  // and how many heartbeats per second the coordinator accepts; either zero: no pacing.
  Duration heartbeat_interval{0};
  double max_heartbeat_rate = 0;
  std::size_t max_members = 4096;  // joins beyond this are refused
  Epoch last_epoch = 0;            // the first view gets last_epoch + 1
  MemberId last_member_id = 0;     // the first member gets last_member_id + 1
  Duration confirm_silence = std::chrono::milliseconds(300);  // a suspect this silent is dead
  Duration ready_timeout = std::chrono::seconds(2);           // members must be Ready within this
  Duration boundary_timeout = std::chrono::seconds(2);        // a boundary waits this for everyone
  Duration resume_timeout = std::chrono::seconds(3);          // after restore(): wait for resumes
  StragglerConfig straggler;
};

// Capabilities "name:value" that every member must advertise alike: TLS on data links
// (transport/tcp/tls.h: "tls:off", "tls:cross-zone/psk", "tls:all/cert", ...). A member that does
// not advertise one is not compared on it.
inline constexpr std::string_view kSharedSettings[] = {"tls"};

// What a joiner says about itself (validated by the caller before join()).
struct MemberLabels {
  std::string name;  // for logs
  std::string host;
  std::string zone;
  std::string data_address;  // "host:port"
  std::vector<std::string> capabilities;
};

enum class PeerPhase : std::uint8_t {
  kWaiting,   // joined (or resumed), but no view issued yet: in no view
  kPending,   // joined after the first view: waits for a step boundary
  kInView,    // part of the current view
  kResuming,  // journaled member of a restarted coordinator, not heard from yet
};

// Everything the coordinator knows about one member: one record, not parallel maps.
struct PeerState {
  MemberId id = 0;
  MemberLabels labels;
  PeerPhase phase = PeerPhase::kWaiting;
  TimePoint joined_at{};
  TimePoint last_heartbeat{};                    // the join counts as the first heartbeat
  Epoch known_epoch = 0;                         // latest epoch it reported (heartbeat, Ready)
  std::uint64_t step = 0;                        // latest step the member reported
  std::optional<ReadyReport> ready;              // its last Ready (for the epoch in ready->epoch)
  Epoch boundary_epoch = 0;                      // the epoch of its last boundary request
  bool leaving = false;                          // ... and whether it leaves with that boundary
  std::deque<bool> lag_history;                  // straggler verdicts of its last W evaluated steps
  std::optional<std::uint64_t> last_timed_step;  // the last step it reported a timing for
  bool timing_warmup = true;  // its next timing spans its entry into the view: not judged
  // When the current view last went to it (pushed with the view, or resent after a
  // heartbeat that named an older epoch); nullopt: not since it reconnected.
  std::optional<TimePoint> view_sent_at;
  // When its control connection was closed under the coordinator (its kernel closed it:
  // the process died or shut it), unless it was heard from since.
  std::optional<TimePoint> connection_closed;
};

enum class RemovalReason : std::uint8_t {
  kLeft,              // the member asked to leave (Leave, or a leaving boundary request)
  kHeartbeatTimeout,  // silent for longer than heartbeat_timeout
  kMalformed,         // sent bytes that do not decode, or broke the protocol
  kFailureConfirmed,  // a peer reported it and it was silent for confirm_silence
  kReadyTimeout,      // sent no Ready within ready_timeout after a view
  kBoundaryTimeout,   // sent no boundary request within boundary_timeout
  kStraggler,         // evicted by the straggler policy
  kResumeTimeout,     // journaled, but did not resume after a coordinator restart
};
// "left", "heartbeat_timeout", "malformed", "failure_confirmed", "ready_timeout",
// "boundary_timeout", "straggler", "resume_timeout"
std::string_view to_string(RemovalReason reason);

struct Removal {
  MemberId id = 0;
  RemovalReason reason = RemovalReason::kLeft;
  std::string name;  // the member's name, for logs
  // kFailureConfirmed: the member whose failure report was confirmed first (0 and "" when
  // the coordinator noticed by itself: a heartbeat or a round went silent).
  MemberId reported_by = 0;
  std::string reporter_name;
};

// Why a view was issued (the `cause` label of tributary_view_changes_total).
enum class ViewCause : std::uint8_t {
  kInitial,      // the initial world is complete
  kJoin,         // a joiner admitted directly into an empty view
  kLeave,        // a Leave outside a step boundary
  kFailure,      // removals: heartbeat timeout, confirmed report, ready/boundary timeout, malformed
  kBoundary,     // a step boundary: leavers out, pending joiners in
  kStraggler,    // the straggler policy evicted someone
  kLinkRebuild,  // an unconfirmable failure report: same members, fresh epoch
  kResume,       // the first view after a coordinator restart
};
std::string_view to_string(ViewCause cause);

// The answer to a complete Ready round.
struct GoDecision {
  Epoch epoch = 0;
  std::uint64_t commit_through = 0;
  std::vector<MemberId> joiners;
  MemberId state_source = 0;
  std::vector<MemberId> recipients;  // everyone, or one member that repeated its Ready
};

// What the caller must carry out, in this order: tell each removed member it is out
// (LeaveAck for kLeft, Evicted otherwise), journal and then send `new_view` (if any) to
// every member in it, then send `go` (if any) to its recipients. `log` holds decisions
// worth a line of their own (straggler verdicts, unconfirmed suspicions).
struct Decisions {
  std::vector<Removal> removed;
  std::optional<View> new_view;
  ViewCause cause = ViewCause::kFailure;  // meaningful with new_view
  std::optional<GoDecision> go;
  std::vector<std::string> log;
  std::vector<std::string> refused;  // claims not believed, each with who and why
  // Ask every member of the current view to heartbeat now (Probe): a failure report
  // waits for the answers, not for the members' next heartbeat at the paced interval.
  bool probe = false;

  bool empty() const {
    return removed.empty() && !new_view && !go && log.empty() && refused.empty() && !probe;
  }
};

struct JoinDecision {
  MemberId id = 0;
  Decisions decisions;  // new_view, when present, includes the joiner
};

struct HeartbeatDecision {
  bool known = false;  // false: not a member (removed or never joined)
  Epoch current_epoch = 0;
  bool resend_view = false;  // the member reported an older epoch than its current view
  bool joiners_pending = false;
  std::string refused;  // non-empty: an impossible claim in the heartbeat, not believed
};

class Membership {
 public:
  explicit Membership(MembershipConfig config);

  // kUnavailable when max_members are already in; kEvicted (the message says until when)
  // for a member evicted as a straggler whose cool-down has not passed (matched by name);
  // kInvalidArgument for a joiner whose data-plane settings that every member must share
  // (capabilities named in kSharedSettings, e.g. "tls:all/psk") differ from a member's: its
  // links to everyone would be refused, and a view holding it would fail for all.
  Result<JoinDecision> join(MemberLabels labels, TimePoint now);
  // After restore(): a journaled member is back (kResuming -> kWaiting; the view follows
  // once all are back). A current member that reconnected is simply known again (no view
  // change). kInvalidArgument for an id this membership does not expect or a name that
  // differs from the journaled one.
  Result<JoinDecision> resume(MemberId id, MemberLabels labels, TimePoint now);
  // A restarted coordinator: the members of the journaled view, to wait for, and those of
  // them that held the training state when it was issued (nullopt: all of them). The
  // others are joiners: the next Go names them and a state source, as for any join (a
  // joiner whose view had started before the restart gets the state again: the same
  // bytes it holds).
  void restore(std::vector<std::pair<MemberId, MemberLabels>> members, TimePoint now,
               const std::optional<std::vector<MemberId>>& with_state = std::nullopt);
  // The members of `view` that hold the training state: those of the last started view
  // (for the journal, which records it with every view).
  std::vector<MemberId> with_state(const View& view) const;
  // A member adopted view r.epoch. Reports for another epoch are ignored.
  Decisions ready(MemberId id, const ReadyReport& report, TimePoint now);
  // A member reached a step boundary in `epoch` (ignored unless it is the current one).
  Decisions boundary(MemberId id, Epoch epoch, bool leaving, TimePoint now);
  // `reporter` lost `suspect` (0: unknown) in `epoch` (ignored unless current).
  Decisions failure_report(MemberId reporter, Epoch epoch, MemberId suspect, TimePoint now);
  // The control connection of `id` was closed (not by the coordinator). Alone it removes
  // nobody (a connection may drop and come back); with a failure report naming it (or
  // naming nobody) it confirms the failure at once instead of after confirm_silence: a
  // peer lost its link to the member and the member's own kernel closed its socket.
  Decisions connection_closed(MemberId id, TimePoint now);
  // Compute seconds of `id` in `step` (straggler policy input).
  Decisions step_timing(MemberId id, std::uint64_t step, double compute_seconds, TimePoint now);
  // Unknown ids are ignored (empty Decisions): a leave may race a timeout.
  Decisions leave(MemberId id, TimePoint now);
  // Why a Leave of `id` must wait (empty: it may go now). A member that returned a small
  // all-reduce without the agreement round may be the only holder of that result
  // (docs/fault-tolerance.md, "Leaving with a returned result"): while a view it has not
  // adopted, or a failure report that will bring one, is pending, a peer that lacks the
  // result may need it in that view's repair, so the member moves into the view first.
  std::string leave_must_wait(MemberId id, const LeaveTerms& terms) const;
  Decisions remove(MemberId id, RemovalReason reason, TimePoint now);
  // `want_view`: the member could not apply an incremental view (membership/view_delta.h)
  // and asks for the whole one: resent at once when it is behind, whenever the last went.
  HeartbeatDecision heartbeat(MemberId id, Epoch known_epoch, std::uint64_t step, TimePoint now,
                              bool want_view = false);
  // How many heartbeat intervals a view push is given to arrive before a heartbeat that
  // names an older epoch gets the view again.
  static constexpr int kViewResendAfter = 3;
  // Removes every member silent for longer than heartbeat_timeout; enforces the ready,
  // boundary and resume timeouts; re-checks failure suspicions.
  Decisions tick(TimePoint now);

  // When to tick() next: never later than the earliest time at which tick() could decide
  // something (TimePoint::max() if never). It may be earlier (a heartbeat since the last
  // sweep is not looked at); a tick() at that time that decides nothing moves it on.
  TimePoint next_expiry() const;
  // The interval members are asked to heartbeat at, and the silences in force at `now`.
  Duration heartbeat_interval() const { return pace_.interval(); }
  Duration heartbeat_timeout(TimePoint now) const {
    return pace_.scaled(config_.heartbeat_timeout, now);
  }
  Duration confirm_silence(TimePoint now) const {
    return pace_.scaled(config_.confirm_silence, now);
  }
  bool joiners_pending() const;
  // The member id counter (the last id handed out).
  MemberId last_member_id() const { return last_id_; }
  // The epoch whose Go was sent last (0: none yet).
  Epoch started_epoch() const { return started_epoch_; }
  // The latest issued view (epoch 0 and empty before the first one).
  const View& view() const { return view_; }
  // No view is issued before initial_world_size members wait: before the first view, and
  // again after a world emptied with reform_when_empty.
  bool forming() const { return !first_view_issued_; }
  Epoch epoch() const { return view_.epoch; }
  std::size_t size() const { return peers_.size(); }
  const PeerState* find(MemberId id) const;
  const std::map<MemberId, PeerState>& peers() const { return peers_; }
  const MembershipConfig& config() const { return config_; }

 private:
  struct Departure {
    Departure(MemberId member, RemovalReason why, MemberId reporter = 0)
        : id(member), reason(why), reported_by(reporter) {}
    MemberId id;
    RemovalReason reason;
    MemberId reported_by;  // Removal::reported_by
  };
  using Gone = std::vector<Departure>;
  // Removes `gone`; issues a view when a member of the current view went (or `force`),
  // admitting pending joiners if `admit_joiners` or if the view would be empty.
  Decisions remove_all(const Gone& gone, ViewCause cause, TimePoint now, bool force = false,
                       bool admit_joiners = false);
  // With reform_when_empty, after the view that emptied the world: forming again.
  Decisions reform_world(Decisions out, TimePoint now);
  // Issues a new view if the initial world is (or was) complete.
  std::optional<View> maybe_issue_view(TimePoint now, bool admit_joiners);
  View build_view(Epoch epoch) const;
  bool in_view(MemberId id) const;
  // True while Go is outstanding and at least one member sent Ready for this epoch.
  bool ready_round_waiting() const;
  // Round completions.
  std::optional<GoDecision> maybe_go(Decisions& out);
  // Members of a waiting Ready round that sent no Ready and are silent.
  Gone silent_in_ready_round(TimePoint now) const;
  Decisions finish_boundary(TimePoint now, const Gone& silent);
  Decisions check_suspicions(TimePoint now);
  MemberId first_reporter(MemberId suspect) const;
  // When `p` counts as failed for a suspicion: silent for longer than the (scaled)
  // confirmation silence, or no answer to the last probe within the unscaled one.
  TimePoint confirmed_dead_at(const PeerState& p, TimePoint now) const;
  void resized(TimePoint now);
  Decisions finish_resume(TimePoint now);
  Decisions evaluate_step(std::uint64_t step, TimePoint now);

  struct Suspicion {
    MemberId reporter = 0;
    MemberId suspect = 0;  // 0: unknown
    Epoch epoch = 0;
    TimePoint reported_at{};
  };

  MembershipConfig config_;
  std::map<MemberId, PeerState> peers_;  // ordered: deterministic iteration
  View view_;
  Epoch last_epoch_;
  MemberId last_id_;
  bool first_view_issued_ = false;
  // The Ready round of view_ (none before the first view); go_sent once it completed.
  TimePoint ready_deadline_ = TimePoint::max();
  bool go_sent_ = false;
  std::optional<GoDecision> last_go_;
  // The members of the last started (Go'd) view: "the previous epoch" of the commit rule.
  Epoch started_epoch_ = 0;
  std::vector<MemberId> started_members_;
  TimePoint boundary_deadline_ = TimePoint::max();  // max: no boundary in progress
  std::vector<Suspicion> suspicions_;
  TimePoint resume_deadline_ = TimePoint::max();                    // max: not resuming
  std::map<std::uint64_t, std::map<MemberId, double>> step_times_;  // step -> reports
  std::map<std::string, TimePoint> cooldown_until_;  // evicted straggler name -> earliest rejoin
  // Counts that keep per-message work O(log n) at thousands of members
  // (bench/results/membership_scale_*.md): peers in kPending (every heartbeat answers
  // whether there are any), and view members whose Ready for view_ arrived (each Ready
  // asks whether all have).
  std::size_t pending_ = 0;
  std::size_t ready_ = 0;
  HeartbeatPace pace_;
  // No member's last heartbeat is older than this (the heartbeat sweep runs when it can
  // have expired: once per timeout, not once per tick).
  TimePoint oldest_heartbeat_ = TimePoint::max();
  std::optional<TimePoint> last_probe_;  // when the last probe was asked for
  // The earliest time check_suspicions() can confirm or rebuild something.
  TimePoint next_suspicion_check_ = TimePoint::max();
};

}  // namespace tributary::membership
