// The coordinator's Prometheus metrics (prometheus-cpp), registered in one registry.
// Updated from the coordinator thread; scraped from the metrics server's thread
// (core/metrics_server.h; prometheus-cpp metrics are thread-safe).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "membership/membership.h"

namespace prometheus {
class Counter;
class Gauge;
template <typename T>
class Family;
class Registry;
}  // namespace prometheus

namespace tributary::coordinator {

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(prometheus::Registry& registry);

  void set_membership(std::size_t members, membership::Epoch epoch);
  void joined();
  void left();
  // Involuntary removals only (heartbeat_timeout, malformed); leaves count in left().
  void removed(membership::RemovalReason reason);
  // Failures confirmed by the coordinator (heartbeat timeout, confirmed report, ready or
  // boundary timeout), and every involuntary removal by reason and member name.
  void evicted(membership::RemovalReason reason, const std::string& member);
  void view_change(membership::ViewCause cause);
  // A view sent to `deltas` members as a delta of `delta_bytes` and to `fulls` as the whole
  // view of `full_bytes` (incremental views: membership/view_delta.h).
  void views_sent(std::size_t deltas, std::size_t delta_bytes, std::size_t fulls,
                  std::size_t full_bytes);
  void set_joiners_pending(std::size_t n);
  // Federated rounds (docs/federated.md): a decision ("decided", "failed") or a commit
  // ("committed"), and the members of the view left out of a decided round (late).
  void federated_round(std::string_view outcome);
  void federated_late(std::size_t members);
  void message(std::string_view type);
  void malformed();
  void auth_failed();
  void refused_claim();
  // Replicated coordinators: whether this process leads now, and each time it won an
  // election (a takeover) or stood down.
  void set_leading(bool leading);
  void took_over();
  void stood_down();

 private:
  prometheus::Gauge* size_;
  prometheus::Gauge* epoch_;
  prometheus::Counter* joins_;
  prometheus::Counter* leaves_;
  prometheus::Counter* malformed_;
  prometheus::Counter* auth_failures_;
  prometheus::Counter* refused_claims_;
  prometheus::Family<prometheus::Counter>* removed_;
  prometheus::Family<prometheus::Counter>* messages_;
  prometheus::Counter* failures_confirmed_;
  prometheus::Family<prometheus::Counter>* evictions_;
  prometheus::Family<prometheus::Counter>* view_changes_;
  prometheus::Counter* views_sent_delta_;
  prometheus::Counter* views_sent_full_;
  prometheus::Counter* view_bytes_delta_;
  prometheus::Counter* view_bytes_full_;
  prometheus::Gauge* joiners_pending_;
  prometheus::Family<prometheus::Counter>* federated_rounds_;
  prometheus::Counter* federated_late_;
  prometheus::Gauge* leader_;
  prometheus::Counter* takeovers_;
  prometheus::Counter* step_downs_;
  std::map<std::string, prometheus::Counter*, std::less<>> message_counters_;
};

}  // namespace tributary::coordinator
