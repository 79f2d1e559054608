// The agent's side of the control plane: one ZeroMQ DEALER connection to the coordinator,
// the production implementation of ControlPlane (control_plane.h, its contract).
//
// join() runs the challenge-response handshake on the calling thread (the secret never
// travels; the coordinator must prove it knows the secret too). Once joined, a background
// thread owned by the client sends heartbeats at the interval the coordinator asks for
// and receives pushed views; callers read them with view() / wait_for_view(). Nothing
// blocks without a deadline.
//
// Thread-safety: every method may be called from any thread; join() at most once.
// Destroying the client stops the heartbeat thread and closes the connection *without*
// leaving: to the coordinator that is a crash, detected by heartbeat timeout. Call
// leave() first for a clean exit.
//
// View changes (docs/fault-tolerance.md): after adopting a view the agent calls ready()
// and trains in that epoch only after Go. Failure reports, step timings and boundary
// requests are fire-and-forget (queued to the client's thread, never blocking).
// A restarted coordinator (new instance id, or "unknown connection" answers) is resumed
// transparently: the client re-authenticates with its member id and keeps it; the agent
// sees just a newer view.
//
// Log lines go to the Logger given at construction (the agent passes a child of its own,
// so they carry its member name and epoch). This header includes no protobuf or ZeroMQ
// header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control_client/control_plane.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"
#include "membership/commit_rule.h"
#include "membership/view.h"

namespace prometheus {
class Registry;
}

namespace tributary::control_client {

class CoordinatorClient final : public ControlPlane {
 public:
  // `metrics`, when given, gets gauges tributary_membership_size and tributary_epoch for
  // the view this agent holds (one client per registry). It must outlive the client.
  explicit CoordinatorClient(Logger log = Logger("control"),
                             prometheus::Registry* metrics = nullptr);
  ~CoordinatorClient() override;
  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  // kAuthFailed: the coordinator rejected our proof (wrong cluster secret) or could not
  //   prove the secret itself. kInvalidArgument: a label or the endpoint is unusable (or
  //   join() was called twice). kUnavailable: no answer by the deadline (ZeroMQ connects
  //   lazily, so an unreachable coordinator shows up only as silence) or the coordinator
  //   is full. kTimedOut: the handshake started but did not finish by the deadline.
  Result<Joined> join(const ClientConfig& config, Deadline deadline) override;

  // The first view with epoch >= min_epoch that includes this member. kEvicted when the
  // coordinator removed us, kAborted after leave(), kTimedOut at the deadline.
  Result<membership::View> wait_for_view(membership::Epoch min_epoch, Deadline deadline) override;
  void set_view_listener(ViewListener listener) override;
  // The latest view received (epoch 0 before the first).
  membership::View view() const;
  membership::MemberId member_id() const override;
  // The training step reported in heartbeats (future straggler policy input).
  void set_step(std::uint64_t step) override;
  // ok while the coordinator answers heartbeats; kEvicted once removed; kUnavailable when
  // no heartbeat was acknowledged for more than 5 heartbeat intervals.
  Status health() const;
  // Stops heartbeats and tells the coordinator we go; waits for its acknowledgement.
  // ok also when we were already out (evicted). kTimedOut at the deadline (the
  // coordinator then removes us by heartbeat timeout anyway). kUnavailable when the
  // coordinator answers that this member must first move to a newer view (ControlPlane).
  Status leave(Deadline deadline, const membership::LeaveTerms& terms) override;
  using ControlPlane::leave;

  // Sends Ready for `r.epoch` (what this member tells the coordinator when it adopts that
  // view: membership/commit_rule.h) and waits for the coordinator's Go for that epoch
  // (Ready is repeated every heartbeat interval until then). kAborted when a newer view
  // superseded r.epoch before Go (re-read view() and call ready() for the newer one) or
  // after leave(); kEvicted if removed; kTimedOut at the deadline.
  Result<Go> ready(const membership::ReadyReport& r, Deadline deadline) override;
  // Non-blocking: this member lost or timed out on `suspect` (0: unknown) in `epoch`.
  void report_failure(membership::Epoch epoch, membership::MemberId suspect,
                      const std::string& detail) override;
  // Non-blocking: per-step compute time of this member (straggler policy input).
  void report_step(std::uint64_t step, double compute_seconds) override;
  // Non-blocking: rides the next heartbeat (and every 20th after it) while `epoch` is the
  // view's.
  void report_links(membership::Epoch epoch, std::vector<membership::LinkPath> links) override;
  // True when the coordinator announced (in heartbeat acks) joiners waiting for a step boundary.
  bool joiners_pending() const override;
  bool heard_recently() const override;
  // Non-blocking: this member reached a step boundary in `epoch` and asks for a boundary
  // view change. leaving=true: it drains and leaves with that change; the coordinator
  // answers LeaveAck, after which leave() returns ok at once.
  void request_boundary(membership::Epoch epoch, bool leaving) override;
  // Federated rounds (control_plane.h): RoundReady / RoundDone sent at once and repeated
  // every heartbeat interval until answered or a newer view arrives.
  Result<membership::RoundDecision> await_round(const membership::RoundReady& request,
                                                Deadline deadline) override;
  Status commit_round(membership::Epoch epoch, std::uint64_t round, Deadline deadline) override;
  // True once the coordinator acknowledged our leave (boundary drain or leave()).
  bool left() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary::control_client
