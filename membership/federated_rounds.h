// Federated rounds at the coordinator (docs/federated.md), as pure single-threaded code:
// RoundReady / RoundDone messages and the passage of time go in, decisions to send come
// out. No socket, thread or clock: the coordinator service and the in-process
// MemoryCoordinator carry the output out, and tests/membership drive it with a fake clock.
//
// Rules this class guarantees (each tested in tests/membership/federated_rounds_test.cc):
//  - A round opens at the first RoundReady for it (from a member of the current view, in
//    the current epoch); the opener's deadline and min_participants are the round's.
//  - It closes when every member of the current view is ready, or at opened_at + deadline
//    (tick()), whichever comes first. Its contributors are the members that were ready,
//    with their weights, by rank. Fewer than min_participants: the round *fails* (a final
//    decision, "round R: K of N members contributed by the deadline, fewer than
//    min_participants M").
//  - Every decision goes to every member of the view (RoundOutput::decided). A RoundReady
//    for a round already decided is answered with the stored decision (replies): a late
//    member learns at once that it is late. The last `kept` rounds are kept; a RoundReady
//    for an older round than those is answered with a failed decision naming that.
//  - Commit: a decided round commits once every contributor sent RoundDone for the
//    decision's epoch (RoundOutput::committed: to the contributors). Nothing else commits
//    a round, so a contributor that receives the commit knows every contributor holds the
//    result.
//  - A new view (on_view) aborts every decided, uncommitted round of an older epoch and
//    decides it again at once in the new epoch with its surviving contributors and their
//    weights (or fails it, below min_participants): late members stay late, nobody waits
//    a second deadline. A RoundDone for the old epoch no longer commits it. An open round
//    keeps the readiness of the members still in the view and its opening time.
//  - Committed and failed decisions are final; an answer to a member is one of them or the
//    current decision.
//  - Claims are checked: a weight that is not finite and > 0 (or above kMaxRoundWeight), a
//    zero deadline or min_participants, a round at or beyond kSeqLimit, a sender outside
//    the view are refused (RoundOutput::refused) and change nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "membership/view.h"

namespace tributary::membership {

inline constexpr std::size_t kRoundsKept = 64;
// Weights are sample counts and the like; the bound keeps weight x value finite in float.
inline constexpr double kMaxRoundWeight = 1e15;
inline constexpr Duration kMaxRoundDeadline = std::chrono::hours(24);
inline constexpr std::uint32_t kMaxMinParticipants = 65536;  // the most members a view has

// A member is ready for a round: it contributes with `weight` if the round is still open.
struct RoundReady {
  MemberId member = 0;
  Epoch epoch = 0;  // the view the member holds
  std::uint64_t round = 0;
  double weight = 1.0;
  Duration deadline = std::chrono::seconds(10);  // from the round's opening
  std::uint32_t min_participants = 1;
};

struct RoundContributor {
  MemberId id = 0;
  double weight = 0;
  friend bool operator==(const RoundContributor&, const RoundContributor&) = default;
};

struct RoundDecision {
  Epoch epoch = 0;  // the view whose members run (ran) the round's data phase
  std::uint64_t round = 0;
  bool failed = false;
  bool committed = false;  // every contributor held the result: final
  std::string reason;      // failed: why
  std::vector<RoundContributor> contributors;  // by rank in the view of `epoch`
  std::uint32_t members = 0;                   // that view's size
  std::uint32_t min_participants = 1;

  bool contributed(MemberId id) const {
    for (const auto& c : contributors) {
      if (c.id == id) return true;
    }
    return false;
  }
  // Summed in rank order: every member computes the same bits.
  double total_weight() const {
    double w = 0;
    for (const auto& c : contributors) w += c.weight;
    return w;
  }
  // Whether this decision answers `member` asking in `epoch`: a final one (failed, or the
  // member is not a contributor: late; or committed), or one naming it a contributor in
  // that very epoch. A decision naming it a contributor in another epoch is not an answer
  // (the round is decided again in the newer view).
  bool answers(MemberId member, Epoch asking) const {
    return failed || committed || !contributed(member) || epoch == asking;
  }
  friend bool operator==(const RoundDecision&, const RoundDecision&) = default;
};

struct RoundCommit {
  Epoch epoch = 0;
  std::uint64_t round = 0;
  std::vector<MemberId> recipients;  // the contributors
  bool resend = false;               // again, to a contributor whose copy was lost
};

// What the caller sends, in this order: `decided` to every member of the current view,
// `replies` to one member each, `committed` to its recipients.
struct RoundOutput {
  std::vector<RoundDecision> decided;
  std::vector<std::pair<MemberId, RoundDecision>> replies;
  std::vector<RoundCommit> committed;
  std::vector<std::string> log;
  std::vector<std::string> refused;
  // Members of the view left out when rounds closed (late), not counting re-decisions.
  std::size_t late = 0;

  bool empty() const {
    return decided.empty() && replies.empty() && committed.empty() && log.empty() &&
           refused.empty();
  }
  void append(RoundOutput more);
};

class FederatedRounds {
 public:
  explicit FederatedRounds(std::size_t kept = kRoundsKept) : kept_(kept) {}

  // `view`: the current view.
  RoundOutput ready(const RoundReady& r, const View& view, TimePoint now);
  // Contributor `id` holds the result of `round` decided in `epoch`.
  RoundOutput done(MemberId id, Epoch epoch, std::uint64_t round);
  // Closes the open rounds whose deadline passed.
  RoundOutput tick(const View& view, TimePoint now);
  // A new view was issued (see the rules above).
  RoundOutput on_view(const View& view, TimePoint now);
  // The earliest deadline of an open round (TimePoint::max() if none).
  TimePoint next_deadline() const;
  // The round's latest decision, if it is decided and kept.
  const RoundDecision* decision(std::uint64_t round) const;
  std::size_t size() const { return rounds_.size(); }
  // Members ready for `round` while it is open (0 otherwise).
  std::size_t ready_count(std::uint64_t round) const {
    auto it = rounds_.find(round);
    return it == rounds_.end() || it->second.phase != Phase::kOpen ? 0 : it->second.ready.size();
  }

 private:
  enum class Phase : std::uint8_t { kOpen, kDecided, kFinal };
  struct Round {
    Phase phase = Phase::kOpen;
    Epoch epoch = 0;
    TimePoint opened_at{};
    Duration deadline{};
    std::uint32_t min_participants = 1;
    std::map<MemberId, double> ready;  // kOpen
    RoundDecision decision;            // kDecided, kFinal
    std::set<MemberId> done;           // kDecided: contributors holding the result
  };

  // Decides `round` from `weights` (ids and weights) in `view`; `again`: a re-decision
  // after a view change (its left-out members are not late).
  RoundOutput decide(std::uint64_t number, Round& round, const std::map<MemberId, double>& weights,
                     const View& view, bool again = false);
  void keep_within_bound();

  std::size_t kept_;
  std::map<std::uint64_t, Round> rounds_;  // by round number
};

}  // namespace tributary::membership
