// The control plane as the agent runtime sees it: the seam between a Worker and the
// coordinator. Two implementations: CoordinatorClient (ZeroMQ, a real coordinator in
// another process) and MemoryControlPlane (in-process, the real membership::Membership
// on a clock the test drives), so the Worker's recovery can be tested with ranks as
// threads.
//
// Contract (docs/fault-tolerance.md is the protocol it carries):
//  - join() at most once, before anything else but member_id(); a second join() is
//    kInvalidArgument.
//  - Waits (join, wait_for_view, ready, leave) return by their deadline at the latest:
//    kTimedOut (kUnavailable for a join nobody answered). kEvicted once this member was
//    removed; kAborted after it left.
//  - Views: wait_for_view(E) returns the newest view with epoch >= E that includes this
//    member. Epochs only grow.
//  - ready(r) tells the coordinator this member adopted view r.epoch (with its commit
//    numbers about the epoch it leaves) and returns that epoch's Go; kAborted when a newer
//    view superseded r.epoch first (adopt the newer one and call ready() again).
//  - report_failure, report_step and request_boundary never block: fire and forget, repeated
//    by the implementation where a loss would stall the protocol (a boundary request until
//    a newer view arrives).
//  - Federated rounds (docs/federated.md): await_round(r) tells the coordinator this member
//    is ready for round r.round in view r.epoch and returns the decision that answers it
//    (membership::RoundDecision::answers: a final one, or one naming this member a
//    contributor in r.epoch); decisions that arrive while the member computes are kept
//    (the last kRoundsKept rounds), so a late member is told at once. commit_round(E, R)
//    says this contributor holds round R's result of epoch E and returns once the
//    coordinator committed it. Both: kAborted when a view newer than the epoch arrives
//    first (adopt it and ask again: the round is decided again there); RoundReady and
//    RoundDone are repeated by the implementation until answered.
//  - Liveness (heartbeats) is the implementation's business, not the caller's.
//  - Thread-safety: every method may be called from any thread (the Worker's idle
//    recovery moves to a view while its user's thread reports failures, say).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "membership/cluster_status.h"
#include "membership/commit_rule.h"
#include "membership/federated_rounds.h"
#include "membership/view.h"

namespace tributary::control_client {

struct ClientConfig {
  std::string endpoint;      // "tcp://host:port" of the coordinator
  std::string secret;        // cluster secret
  std::string host;          // host label (defaults to nothing: required)
  std::string zone;          // zone label, may be empty
  std::string data_address;  // "host:port" of this agent's data-plane listener
  std::vector<std::string> capabilities;
  std::string name;  // empty: "<host>/<process name>:<pid>"
  // zero: the interval the coordinator advertises; otherwise the fastest this client
  // heartbeats (a coordinator pacing a large membership may ask for a slower one)
  Duration heartbeat_interval{0};
};

struct Joined {
  membership::MemberId member_id = 0;
  // The view that admitted this member, or an empty view (epoch 0) while the coordinator
  // is still gathering its initial world: then wait_for_view(1, deadline).
  membership::View view;
};

// The coordinator's answer once every member of `epoch` is Ready.
struct Go {
  membership::Epoch epoch = 0;
  std::uint64_t commit_through = 0;  // commit held results with seq <= this; next seq = this + 1
  std::vector<membership::MemberId> joiners;  // members that need the training state
  membership::MemberId state_source = 0;  // who sends it (lowest-rank member of the previous view)
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  virtual Result<Joined> join(const ClientConfig& config, Deadline deadline) = 0;
  virtual membership::MemberId member_id() const = 0;  // 0 before join()
  virtual Result<membership::View> wait_for_view(membership::Epoch min_epoch,
                                                 Deadline deadline) = 0;
  // What this member learns as it arrives, without a thread of the caller's waiting for
  // it: newer views that hold this member, in epoch order (one overtaken before it was
  // delivered may be skipped), and once its eviction (kEvicted, the coordinator's reason). The
  // listener runs on the thread that learned it (the client's own for CoordinatorClient),
  // outside the plane's locks; it must return promptly and not call the plane. Replacing
  // it (nullptr: none) returns once no call of the old one is in progress. Set it after
  // join(); what arrived before it was set is not delivered (wait_for_view() has it).
  using ViewListener = std::function<void(const Result<membership::View>&)>;
  virtual void set_view_listener(ViewListener listener) = 0;
  virtual Result<Go> ready(const membership::ReadyReport& report, Deadline deadline) = 0;
  virtual void report_failure(membership::Epoch epoch, membership::MemberId suspect,
                              const std::string& detail) = 0;
  // The training step, carried by heartbeats (dashboards).
  virtual void set_step(std::uint64_t step) = 0;
  // Compute seconds of this member in `step` (the straggler policy's input).
  virtual void report_step(std::uint64_t step, double compute_seconds) = 0;
  // The paths this member's links take in `epoch` (membership/cluster_status.h), for
  // `tributary status`: sent with the next heartbeat when they changed, and now and then
  // again (a coordinator that restarted has none). Never blocks. Dropped by default.
  virtual void report_links(membership::Epoch epoch, std::vector<membership::LinkPath> links) {
    (void)epoch;
    (void)links;
  }
  // The coordinator has joiners waiting for a step boundary.
  virtual bool joiners_pending() const = 0;
  // The coordinator acknowledged a heartbeat of this member within the last 1.5 heartbeat
  // intervals, so it cannot have removed it for silence yet (it waits 3 intervals after a
  // failure report): what a small all-reduce needs before it returns without the commit
  // round (docs/fault-tolerance.md, "A member that was frozen"). False once evicted or left.
  virtual bool heard_recently() const = 0;
  virtual void request_boundary(membership::Epoch epoch, bool leaving) = 0;
  // Leaves for good; ok also when already out. kUnavailable (the coordinator's reason)
  // when `terms` say this member keeps a result a peer may need and a newer view is
  // pending (membership::Membership::leave_must_wait): move to it, then leave again.
  virtual Status leave(Deadline deadline, const membership::LeaveTerms& terms) = 0;
  Status leave(Deadline deadline) { return leave(deadline, membership::LeaveTerms{}); }
  // What leave() returns when the coordinator answers with Membership::leave_must_wait.
  static Status leave_must_wait(const std::string& why) {
    return error(StatusCode::kUnavailable,
                 "the coordinator did not let this member leave yet: " + why);
  }
  // Federated rounds (see the contract above). `request.member` is filled in.
  virtual Result<membership::RoundDecision> await_round(const membership::RoundReady& request,
                                                        Deadline deadline) = 0;
  virtual Status commit_round(membership::Epoch epoch, std::uint64_t round, Deadline deadline) = 0;
};

}  // namespace tributary::control_client
