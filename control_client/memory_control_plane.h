// An in-process control plane for tests of the agent runtime: the coordinator's real
// decisions (membership::Membership) without sockets, on a clock the test drives.
//
// A MemoryCoordinator owns a Membership and a FakeClock and carries out every Decisions
// the way the coordinator service does: removed members learn it (kEvicted, or left),
// every member of a new view receives it, Go reaches its recipients, a probe is answered
// at once by every member that was not silenced. Each member talks to
// it through the ControlPlane that connect() returns (control_plane.h is the contract).
// Nothing is lost or reordered: the protocol's repeats (Ready, boundary requests) are not
// needed here, and are harmless.
//
// Time: the membership sees only the fake clock. advance(d) moves it and counts a
// heartbeat from every member that was not silenced, then ticks the membership (heartbeat,
// ready, boundary timeouts, failure confirmations). silence(id) models a process that
// stops heartbeating (kill -9, SIGSTOP): the next advance() past heartbeat_timeout removes
// it. restart() replaces the coordinator's state as a kill -9 and a restart with its
// journal do. Waits take real deadlines only as a bound on a test that went wrong.
//
// Federated rounds: the coordinator's real round logic (membership::FederatedRounds) on
// the same fake clock: a round's deadline passes when advance() moves the clock past it.
//
// Thread-safety: every method, of the coordinator and of each member's plane, may be
// called from any thread. The coordinator must outlive the planes it connected.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "control_client/control_plane.h"
#include "core/clock.h"
#include "membership/federated_rounds.h"
#include "membership/membership.h"

namespace tributary::control_client {

class MemoryCoordinator {
 public:
  explicit MemoryCoordinator(membership::MembershipConfig config);
  MemoryCoordinator(const MemoryCoordinator&) = delete;
  MemoryCoordinator& operator=(const MemoryCoordinator&) = delete;

  // A member's control plane, not joined yet.
  std::unique_ptr<ControlPlane> connect();

  // Time passes: every member that is not silenced heartbeats at the new time, then the
  // membership ticks.
  void advance(Duration d);
  // `id` stops heartbeating from now on, and nothing it sends reaches the coordinator (a
  // killed or frozen process): not its Ready, reports, boundary requests, nor its Leave.
  void silence(membership::MemberId id);
  // The coordinator is killed and restarts from its journal: a fresh Membership that
  // continues the epoch and member-id counters and waits for the members of the last view
  // to resume. Members that are not silenced resume at once (the ZeroMQ client does so
  // transparently); the silenced are removed once the clock passes resume_timeout.
  // Members outside the last view (pending joiners) are unknown to it: evicted.
  void restart();

  membership::View view() const;
  std::size_t member_count() const;
  // How many views were issued so far (the first one included).
  int views_issued() const;
  // From now on `id`'s RoundDone messages are lost (a member that dies after the data phase
  // of a federated round, before it tells the coordinator).
  void lose_round_done(membership::MemberId id);
  // The coordinator's latest decision of federated round `round`, if decided.
  std::optional<membership::RoundDecision> round_decision(std::uint64_t round) const;
  // Members ready for federated round `round` while it is open at the coordinator.
  std::size_t round_ready_count(std::uint64_t round) const;
  // How many failure reports members sent.
  int failure_reports() const;

  class Plane;

 private:
  // What one member has received.
  struct Seat {
    membership::View view;
    std::optional<Go> go;
    bool evicted = false;
    std::string evicted_reason;
    bool left = false;
    bool silenced = false;
    std::uint64_t step = 0;
    std::map<std::uint64_t, membership::RoundDecision> rounds;  // the latest, by round
    std::set<std::pair<membership::Epoch, std::uint64_t>> commits;
  };

  // Carries out `d` (caller holds mu_) and wakes every waiting member.
  void apply(const membership::Decisions& d);
  // Carries out the round logic's output (caller holds mu_) and wakes every waiting member.
  void apply(const membership::RoundOutput& out);
  // Waits (caller holds `lock`) until `done` or the deadline; false at the deadline.
  template <typename Done>
  bool wait(std::unique_lock<std::mutex>& lock, Deadline deadline, Done done);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  FakeClock clock_;
  membership::Membership membership_;
  membership::FederatedRounds rounds_;
  std::map<membership::MemberId, Seat> seats_;
  std::set<membership::MemberId> lost_round_done_;
  int views_issued_ = 0;
  int failure_reports_ = 0;
};

}  // namespace tributary::control_client
