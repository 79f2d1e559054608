// The agent's side of the epoch protocol (docs/fault-tolerance.md) as a pure state machine:
// one collective call at a time (attempts, the commit round, the recovery decision, the
// speculative return and its private copy) and the move to a newer view (Ready/Go with the
// coordinator, quorum, new links, the repair step). Events go in with the time passed in;
// actions come out. No thread, no socket, no clock read: the Worker's driver (agent/
// worker.cc) carries the actions out against the control plane, the data plane and the
// link, and feeds back what happened; tests/agent/runtime drives it from scripts and from
// a randomized schedule explorer with the real Membership.
//
// Protocol of use: every entry point (call(), move()) and every answer returns the actions
// to carry out in order. All of them but the last are effects (drop the link, report a
// failure, restore the input, ...); the last one is either a wait (the driver does it and
// answers with the matching method: kWaitView -> view_arrived / view_wait_failed, ...) or
// the end of the call or move (kReturn, kFail, kMoved). Answering anything but the wait
// that is outstanding is a protocol error: kFail with kInternal.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/result_copy.h"
#include "core/clock.h"
#include "core/status.h"
#include "membership/commit_rule.h"
#include "membership/view.h"

namespace tributary::agent::runtime {

using membership::Epoch;
using membership::MemberId;

struct MachineConfig {
  MemberId self = 0;  // this member's id (set_self() once joined)
  Duration recovery_timeout = std::chrono::seconds(60);  // a call's whole recovery
  Duration connect_timeout = std::chrono::seconds(30);   // one view's links
  // How long a member waits for a newer view before it repeats its request for one.
  Duration view_nudge = std::chrono::seconds(1);
  int min_world_size = 1;                 // a view smaller than this is waited out
  bool agreement = true;                  // the commit round after the data phase
  std::size_t speculative_max_bytes = 0;  // all-reduces up to this return without it
};

// One collective call.
struct CallSpec {
  std::size_t bytes = 0;         // what the data phase moves (the speculative limit)
  std::size_t result_bytes = 0;  // an all-reduce that writes a result: its size; else 0
  bool retry = true;             // false: a failed attempt returns (the state sync)
};

// What a committed call returns.
struct CallOutcome {
  std::uint64_t seq = 0;
  Epoch epoch = 0;                     // the epoch whose members contributed
  std::vector<MemberId> contributors;  // their ids, by rank
  int attempts = 0;
  bool repaired = false;     // the result came from another member's copy (the repair step)
  bool speculative = false;  // returned without the commit round (a copy is kept)

  friend bool operator==(const CallOutcome&, const CallOutcome&) = default;
};

// The coordinator's Go, as far as the machine needs it.
struct GoInfo {
  std::uint64_t commit_through = 0;
  std::vector<MemberId> joiners;
  MemberId state_source = 0;
};

enum class ActionKind : std::uint8_t {
  // Effects.
  kDropLink,       // abort and drop the current link: `status` says why
  kReportFailure,  // tell the coordinator that view `epoch` failed: `text`
  kRestoreInput,   // copy the caller's stashed input back (before a re-run)
  kAdoptView,      // the view (view()) and rank are new: publish them, zones, logs
  kInstallLink,    // keep the link that kConnect produced as the current one
  kDiscardLink,    // the link kConnect produced is not used (below the quorum)
  kWriteResult,    // copy `blob` into the caller's result buffer (a repaired result)
  kRecordRepair,   // the repair step's outcome for metrics: `text` ("received", "re-run")
  kViewStarted,    // a move completed: per-view state follows (compression residuals)
  kLog,            // `text`; `warning`: at warning level, else info
  // Waits: carry out, answer with the named method.
  kWaitView,         // a view with epoch >= `epoch`, until `until`: view_arrived/view_wait_failed
  kSendReady,        // `ready` to the coordinator, Go until `until`: go_arrived/go_failed
  kConnect,          // the view's links, until `until`: connected/connect_failed
  kFitLinks,         // measure the new links, order the ring: links_fitted
  kRepairVote,       // min all-reduce of `vote` (3 int64): repair_voted/repair_failed
  kRepairBroadcast,  // broadcast `size` bytes from rank `root` (`blob` at the root):
                     // repair_received/repair_failed
  kRunAttempt,       // the data phase of seq `seq` in view `epoch`, attempt `attempt`:
                     // data_phase_done
  kRunAgreement,     // the commit round of `seq`: agreement_done
  // Ends.
  kReturn,  // the call committed: `outcome`
  kFail,    // the call (or move) fails with `status`
  kMoved,   // the move (move()) is done: the machine is in a view with links up
};
std::string_view to_string(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::kFail;
  Status status;
  std::string text;
  bool warning = false;  // kLog
  Epoch epoch = 0;
  std::uint64_t seq = 0;
  int attempt = 0;
  TimePoint until{};
  membership::ReadyReport ready;
  std::array<std::int64_t, 3> vote{};
  int root = -1;
  std::size_t size = 0;
  std::vector<std::byte> blob;
  CallOutcome outcome;

  bool is_wait() const {
    return kind >= ActionKind::kWaitView && kind <= ActionKind::kRunAgreement;
  }
  bool is_end() const { return kind >= ActionKind::kReturn; }
};
using Actions = std::vector<Action>;

// One line per action, times relative to `origin` ("+1000ms"): the scripted tests'
// expected output and the explorer's trace.
std::string describe(const Action& action, TimePoint origin);

class EpochMachine {
 public:
  explicit EpochMachine(MachineConfig config) : config_(std::move(config)) {}

  void set_self(MemberId id) { config_.self = id; }
  const MachineConfig& config() const { return config_; }

  // Entry points, when nothing is outstanding.
  // A collective call: attempts until it commits or fails.
  Actions call(const CallSpec& spec, TimePoint now);
  // A move to a view newer than the current one outside a call (the first view, between
  // calls, at a step boundary, before leaving), with the caller's deadline.
  Actions move(TimePoint now, TimePoint deadline);

  // Answers to the outstanding wait.
  Actions view_arrived(const membership::View& view, TimePoint now);
  // kTimedOut: the wait's `until` passed; anything else ends the move (evicted, left).
  Actions view_wait_failed(const Status& status, TimePoint now);
  Actions go_arrived(const GoInfo& go, TimePoint now);
  Actions go_failed(const Status& status, TimePoint now);  // kAborted: a newer view
  Actions connected(TimePoint now);
  Actions connect_failed(const Status& status, TimePoint now);
  Actions links_fitted(const Status& status, TimePoint now);
  Actions repair_voted(const std::array<std::int64_t, 3>& agreed, TimePoint now);
  Actions repair_received(std::span<const std::byte> blob, TimePoint now);
  Actions repair_failed(const Status& status, TimePoint now);
  // `heard_recently`: the coordinator heard from this member lately (a speculative return
  // needs it); `result`: the call's result buffer (kept when the return is speculative).
  Actions data_phase_done(const Status& status, bool heard_recently,
                          std::span<const std::byte> result, TimePoint now);
  Actions agreement_done(const Status& status, TimePoint now);

  // What other threads learn, posted by the driver; the machine acts on them at its next
  // decision point (before an attempt, after a failure, before each wait for a view).
  void evicted(Status why) {
    if (stop_.is_ok()) stop_ = std::move(why);
  }
  void aborted(Status why) {
    if (stop_.is_ok()) stop_ = std::move(why);
  }
  // The worker is shutting down: a move in progress ends before its next wait for a view
  // (a call on links that are up still runs).
  void leaving(Status why) {
    if (leaving_.is_ok()) leaving_ = std::move(why);
  }
  // A view newer than the current one exists (the control plane told of it): the next call
  // moves first.
  void saw_epoch(Epoch epoch) {
    if (epoch > newest_epoch_) newest_epoch_ = epoch;
  }
  // The training state was received (the state sync).
  void state_received() { needs_state_ = false; }
  // The link is gone outside the machine's own actions (the worker left, a federated
  // round's failure dropped it): the next call moves to a view first.
  void links_lost() {
    if (!busy()) links_up_ = false;
  }

  // What the machine holds.
  const membership::View& view() const { return view_; }
  int rank() const { return rank_; }
  Epoch newest_epoch() const { return newest_epoch_; }
  std::uint64_t next_seq() const { return next_seq_; }
  std::uint64_t commit_through() const { return commit_through_; }
  const ResultCopy& result_copy() const { return copy_; }
  bool needs_state() const { return needs_state_; }
  bool links_up() const { return links_up_; }
  bool busy() const { return wait_ != ActionKind::kFail; }
  // The view's member ids by rank.
  std::vector<MemberId> member_ids() const;

 private:
  // What follows a completed move.
  enum class AfterMove : std::uint8_t { kAttempt, kJudge, kReturnMoved };

  Actions begin_attempt(TimePoint now);
  Actions run_attempt(Actions out);
  Actions finish_attempt(const Status& status, TimePoint now);
  Actions start_move(std::uint64_t held_seq, TimePoint deadline, AfterMove then, TimePoint now,
                     Actions out = {});
  Actions wait_view(TimePoint now, Actions out);
  Actions move_failed(const Status& status, TimePoint now, Actions out = {});
  // `why`, and what the move's last connect that did not complete said, if one did not.
  std::string with_last_connect(std::string why) const;
  Actions new_links_failed(const Status& why, const char* during, Actions out = {});
  Actions start_repair(TimePoint now, Actions out);
  Actions repair_done(std::uint64_t through, TimePoint now, Actions out = {});
  Actions judge(const Status& moved, TimePoint now, Actions out);
  CallOutcome repaired_outcome() const;
  Actions protocol_error(std::string_view answer);
  Actions wait(Action action, Actions out);
  Actions end(Action action, Actions out);

  MachineConfig config_;
  Status stop_;     // evicted or aborted: every decision point ends with it
  Status leaving_;  // shutting down: moves end

  // The adopted view.
  membership::View view_;
  int rank_ = -1;
  bool links_up_ = false;
  Epoch newest_epoch_ = 0;
  std::uint64_t next_seq_ = 1;
  std::uint64_t commit_through_ = 0;  // the latest Go's decision
  bool needs_state_ = false;
  ResultCopy copy_;

  // The outstanding wait (kFail: none).
  ActionKind wait_ = ActionKind::kFail;

  // The call in progress.
  struct Call {
    bool active = false;
    CallSpec spec;
    TimePoint deadline{};
    int attempt = 0;
    std::uint64_t seq = 0;
    bool held = false;         // the data phase of `seq` completed here
    bool speculative = false;  // ... and returns without the commit round
    Status failure;            // the failed attempt's status, for the recovery decision
    Epoch failed_epoch = 0;
    std::vector<MemberId> failed_ids;
    bool repaired = false;
    Epoch repaired_epoch = 0;
    std::vector<MemberId> repaired_ids;
  } call_;

  // The move in progress.
  struct Move {
    AfterMove then = AfterMove::kReturnMoved;
    TimePoint deadline{};
    std::uint64_t held_seq = 0;
    Epoch previous = 0;
    std::uint64_t committed = 0;
    Status connect_failure;  // the latest, for the error if no view ever connects
    membership::View candidate;
    std::uint64_t through = 0;  // the repair step's seq
    bool hold = false;          // ... this member holds its copy
    bool lack = false;          // ... this member's call lacks its result
  } move_;
};

}  // namespace tributary::agent::runtime
