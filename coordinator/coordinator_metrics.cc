#include "coordinator/coordinator_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace tributary::coordinator {

CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& registry) {
  size_ = &prometheus::BuildGauge()
               .Name("tributary_membership_size")
               .Help(
                   "Members the coordinator counts (joined, including those waiting for the "
                   "initial world)")
               .Register(registry)
               .Add({});
  epoch_ = &prometheus::BuildGauge()
                .Name("tributary_epoch")
                .Help("Epoch of the latest view issued")
                .Register(registry)
                .Add({});
  joins_ = &prometheus::BuildCounter()
                .Name("tributary_joins_total")
                .Help("Members admitted")
                .Register(registry)
                .Add({});
  leaves_ = &prometheus::BuildCounter()
                 .Name("tributary_leaves_total")
                 .Help("Members that left cleanly")
                 .Register(registry)
                 .Add({});
  malformed_ = &prometheus::BuildCounter()
                    .Name("tributary_control_malformed_total")
                    .Help("Control messages or connections dropped as malformed")
                    .Register(registry)
                    .Add({});
  auth_failures_ = &prometheus::BuildCounter()
                        .Name("tributary_join_auth_failures_total")
                        .Help(
                            "Connections, joins and status requests refused for not proving "
                            "the cluster secret (CURVE handshake, ZAP key check, proof)")
                        .Register(registry)
                        .Add({});
  refused_claims_ = &prometheus::BuildCounter()
                         .Name("tributary_control_refused_claims_total")
                         .Help(
                             "Claims in members' messages the coordinator did not believe "
                             "(impossible seqs or epochs, repeated step timings, reports about "
                             "non-members)")
                         .Register(registry)
                         .Add({});
  removed_ = &prometheus::BuildCounter()
                  .Name("tributary_members_removed_total")
                  .Help("Members removed by the coordinator, by reason (clean leaves not included)")
                  .Register(registry);
  messages_ = &prometheus::BuildCounter()
                   .Name("tributary_control_messages_total")
                   .Help("Well-formed control messages received, by type")
                   .Register(registry);
  failures_confirmed_ = &prometheus::BuildCounter()
                             .Name("tributary_failures_confirmed_total")
                             .Help(
                                 "Member failures the coordinator confirmed (heartbeat timeout, "
                                 "confirmed report, ready/boundary timeout)")
                             .Register(registry)
                             .Add({});
  evictions_ = &prometheus::BuildCounter()
                    .Name("tributary_evictions_total")
                    .Help("Involuntary removals, by reason and member name")
                    .Register(registry);
  view_changes_ = &prometheus::BuildCounter()
                       .Name("tributary_view_changes_total")
                       .Help("Views issued, by cause")
                       .Register(registry);
  federated_rounds_ = &prometheus::BuildCounter()
                           .Name("tributary_federated_rounds_total")
                           .Help("Federated rounds, by outcome: decided (with enough "
                                 "contributors), failed (below min_participants), committed")
                           .Register(registry);
  for (const char* outcome : {"decided", "failed", "committed"}) {
    federated_rounds_->Add({{"outcome", outcome}});
  }
  federated_late_ = &prometheus::BuildCounter()
                         .Name("tributary_federated_late_members_total")
                         .Help("Members of the view left out of a decided federated round "
                               "(not ready by its deadline)")
                         .Register(registry)
                         .Add({});
  auto& views_sent = prometheus::BuildCounter()
                         .Name("tributary_views_sent_total")
                         .Help("Views sent to members, by kind: delta (to a member known to "
                               "hold the previous view) or full")
                         .Register(registry);
  views_sent_delta_ = &views_sent.Add({{"kind", "delta"}});
  views_sent_full_ = &views_sent.Add({{"kind", "full"}});
  auto& view_bytes = prometheus::BuildCounter()
                         .Name("tributary_view_bytes_sent_total")
                         .Help("Bytes of the views sent to members, by kind (delta, full)")
                         .Register(registry);
  view_bytes_delta_ = &view_bytes.Add({{"kind", "delta"}});
  view_bytes_full_ = &view_bytes.Add({{"kind", "full"}});
  joiners_pending_ = &prometheus::BuildGauge()
                          .Name("tributary_joiners_pending")
                          .Help("Joiners waiting for a step boundary")
                          .Register(registry)
                          .Add({});
  leader_ = &prometheus::BuildGauge()
                 .Name("tributary_coordinator_is_leader")
                 .Help("1 while this coordinator leads (issues views), 0 while it stands by")
                 .Register(registry)
                 .Add({});
  takeovers_ =
      &prometheus::BuildCounter()
           .Name("tributary_coordinator_takeovers_total")
           .Help("Elections this coordinator won that continue an earlier leader's state (etcd)")
           .Register(registry)
           .Add({});
  step_downs_ = &prometheus::BuildCounter()
                     .Name("tributary_coordinator_step_downs_total")
                     .Help(
                         "Times this coordinator stopped leading (lease lost, failed "
                         "compare-and-swap, etcd unreachable)")
                     .Register(registry)
                     .Add({});
  // Series that exist from the start read 0 instead of "no data" on dashboards.
  for (auto reason :
       {membership::RemovalReason::kHeartbeatTimeout, membership::RemovalReason::kMalformed}) {
    removed_->Add({{"reason", std::string(membership::to_string(reason))}});
  }
}

void CoordinatorMetrics::set_membership(std::size_t members, membership::Epoch epoch) {
  size_->Set(static_cast<double>(members));
  epoch_->Set(static_cast<double>(epoch));
}

void CoordinatorMetrics::views_sent(std::size_t deltas, std::size_t delta_bytes,
                                    std::size_t fulls, std::size_t full_bytes) {
  views_sent_delta_->Increment(static_cast<double>(deltas));
  views_sent_full_->Increment(static_cast<double>(fulls));
  view_bytes_delta_->Increment(static_cast<double>(deltas * delta_bytes));
  view_bytes_full_->Increment(static_cast<double>(fulls * full_bytes));
}

void CoordinatorMetrics::joined() { joins_->Increment(); }
void CoordinatorMetrics::left() { leaves_->Increment(); }
void CoordinatorMetrics::malformed() { malformed_->Increment(); }
void CoordinatorMetrics::auth_failed() { auth_failures_->Increment(); }
void CoordinatorMetrics::refused_claim() { refused_claims_->Increment(); }

void CoordinatorMetrics::removed(membership::RemovalReason reason) {
  removed_->Add({{"reason", std::string(membership::to_string(reason))}}).Increment();
}

void CoordinatorMetrics::evicted(membership::RemovalReason reason, const std::string& member) {
  using R = membership::RemovalReason;
  if (reason == R::kHeartbeatTimeout || reason == R::kFailureConfirmed ||
      reason == R::kReadyTimeout || reason == R::kBoundaryTimeout) {
    failures_confirmed_->Increment();
  }
  evictions_->Add({{"reason", std::string(membership::to_string(reason))}, {"member", member}})
      .Increment();
}

void CoordinatorMetrics::view_change(membership::ViewCause cause) {
  view_changes_->Add({{"cause", std::string(membership::to_string(cause))}}).Increment();
}

void CoordinatorMetrics::set_leading(bool leading) { leader_->Set(leading ? 1.0 : 0.0); }
void CoordinatorMetrics::took_over() { takeovers_->Increment(); }
void CoordinatorMetrics::stood_down() { step_downs_->Increment(); }

void CoordinatorMetrics::set_joiners_pending(std::size_t n) {
  joiners_pending_->Set(static_cast<double>(n));
}

void CoordinatorMetrics::message(std::string_view type) {
  auto it = message_counters_.find(type);
  if (it == message_counters_.end()) {
    it =
        message_counters_.emplace(std::string(type), &messages_->Add({{"type", std::string(type)}}))
            .first;
  }
  it->second->Increment();
}

void CoordinatorMetrics::federated_round(std::string_view outcome) {
  federated_rounds_->Add({{"outcome", std::string(outcome)}}).Increment();
}

void CoordinatorMetrics::federated_late(std::size_t members) {
  federated_late_->Increment(static_cast<double>(members));
}

}  // namespace tributary::coordinator
