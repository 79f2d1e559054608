// The coordinator's answer to `tributary status`, as pure code: what the membership
// forgets but an operator asks for (each member's recent step reports, the recent view
// changes with their causes) is kept by a StatusTracker, and build_status() turns the
// membership, the tracker (with the links members report) and the coordinator's own facts
// into a ClusterStatus
// (membership/cluster_status.h). No sockets, no clock: time comes in as arguments, so
// tests drive it by hand.
//
// Guarantees: building a status changes nothing (the membership is const); every list is
// bounded (cluster_status.h), whatever the cluster's size; the history survives a
// coordinator restart when the journal does (restore() takes the journal's recent views).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "membership/cluster_status.h"
#include "membership/journal.h"
#include "membership/membership.h"

namespace tributary::coordinator {

class StatusTracker {
 public:
  static constexpr std::size_t kTimedSteps = 8;  // step reports kept per member

  struct StepSample {
    std::uint64_t step = 0;
    double compute_seconds = 0;
    std::int64_t arrival_unix_ns = 0;  // the member's wall clock at its step boundary
  };

  // A StepTiming from member `id`.
  void step_reported(membership::MemberId id, std::uint64_t step, double compute_seconds,
                     std::int64_t arrival_unix_ns);
  // Decisions the coordinator carries out (call before the membership moves on: names of
  // joiners are read from it). Forgets removed members' timings; when the decisions issue
  // a view, records and returns the change (for the journal too).
  std::optional<membership::ViewChange> record(const membership::Decisions& decisions,
                                               const membership::Membership& membership,
                                               std::int64_t unix_ms);
  // A LinkReport from member `id`: the paths of its links in `epoch` (the latest wins).
  void links_reported(membership::MemberId id, membership::Epoch epoch,
                      std::vector<membership::LinkPath> links);
  // The recent views an earlier coordinator process journaled (oldest first).
  void restore(const std::vector<membership::JournalEntry>& views);

  const std::deque<membership::ViewChange>& history() const { return history_; }
  // nullptr for a member with no step report.
  const std::deque<StepSample>* samples(membership::MemberId id) const;
  struct ReportedLinks {
    membership::Epoch epoch = 0;
    std::vector<membership::LinkPath> links;
  };
  // nullptr for a member that reported no links.
  const ReportedLinks* links(membership::MemberId id) const;

 private:
  void remember(membership::ViewChange change);

  std::map<membership::MemberId, std::deque<StepSample>> samples_;
  std::map<membership::MemberId, ReportedLinks> links_;
  std::deque<membership::ViewChange> history_;
  std::map<membership::MemberId, std::string> last_view_;  // id -> name, of the last view
};

// The coordinator's own facts at the moment of the answer.
struct StatusContext {
  std::uint64_t instance_id = 0;
  TimePoint started_at{};  // when this coordinator process bound
  TimePoint now{};
  std::int64_t unix_ms = 0;
  Duration heartbeat_interval{};
  Duration suspect_after{};  // a member silent this long is shown as a suspect
  std::size_t handshakes_open = 0;
};

membership::ClusterStatus build_status(const membership::Membership& membership,
                                       const StatusTracker& tracker, const StatusContext& context);

}  // namespace tributary::coordinator
