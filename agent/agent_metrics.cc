#include "agent/agent_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <tuple>

#include "core/metrics_server.h"

namespace tributary::agent {

class AgentMetrics::Impl {
 public:
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> server;  // last: stopped before the registry goes
  prometheus::Family<prometheus::Counter>* collectives = nullptr;
  prometheus::Family<prometheus::Counter>* federated_rounds = nullptr;
  prometheus::Family<prometheus::Counter>* result_repairs = nullptr;
  prometheus::Family<prometheus::Histogram>* latency = nullptr;
  prometheus::Family<prometheus::Counter>* bytes_sent = nullptr;
  prometheus::Family<prometheus::Counter>* bytes_received = nullptr;
  prometheus::Family<prometheus::Counter>* transport_sent = nullptr;
  prometheus::Family<prometheus::Counter>* transport_received = nullptr;
  prometheus::Family<prometheus::Gauge>* peer_transport = nullptr;
  prometheus::Counter* bad_frames = nullptr;
  prometheus::Counter* crc_failures = nullptr;
  prometheus::Counter* tls_failures = nullptr;
  FrameRefusals seen_refusals;
  prometheus::Family<prometheus::Counter>* path_changes = nullptr;
  prometheus::Counter* reconnects = nullptr;
  std::uint64_t seen_reconnects = 0;
  prometheus::Family<prometheus::Counter>* path_recoveries = nullptr;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::uint64_t>
      seen_changes;
  // Last cumulative values seen per (transport, peer address), to turn snapshots into
  // increments.
  std::map<std::pair<std::string, std::string>, std::pair<std::uint64_t, std::uint64_t>> seen;
  std::vector<prometheus::Gauge*> path_gauges;  // the latest sync's, set to 1
  std::uint16_t port = 0;
};

Result<std::unique_ptr<AgentMetrics>> AgentMetrics::serve(const std::string& bind, Logger log) {
  auto impl = std::make_unique<Impl>();
  auto server = MetricsServer::start(
      bind,
      [registry = impl->registry] {
        return prometheus::TextSerializer().Serialize(registry->Collect());
      },
      std::move(log));
  if (!server) {
    return error(server.status().code(),
                 "cannot serve /metrics on " + bind + ": " + server.status().message());
  }
  impl->server = std::move(server).value();
  impl->port = impl->server->port();
  auto& r = *impl->registry;
  impl->collectives =
      &prometheus::BuildCounter()
           .Name("tributary_collectives_total")
           .Help("Collectives run by this agent, by operation, algorithm and result")
           .Register(r);
  impl->latency = &prometheus::BuildHistogram()
                       .Name("tributary_collective_seconds")
                       .Help("Collective latency on this agent")
                       .Register(r);
  impl->bytes_sent = &prometheus::BuildCounter()
                          .Name("tributary_link_bytes_sent_total")
                          .Help("Data-plane payload bytes sent, by peer address")
                          .Register(r);
  impl->bytes_received = &prometheus::BuildCounter()
                              .Name("tributary_link_bytes_received_total")
                              .Help("Data-plane payload bytes received, by peer address")
                              .Register(r);
  impl->bad_frames = &prometheus::BuildCounter()
                          .Name("tributary_link_bad_frames_total")
                          .Help(
                              "Data-plane frames refused as malformed or corrupted (the "
                              "connection they came on is dropped)")
                          .Register(r)
                          .Add({});
  impl->crc_failures = &prometheus::BuildCounter()
                            .Name("tributary_link_crc_failures_total")
                            .Help(
                                "Data-plane frames whose CRC-32C did not match: corrupted "
                                "in transit, never delivered")
                            .Register(r)
                            .Add({});
  impl->tls_failures = &prometheus::BuildCounter()
                            .Name("tributary_link_tls_failures_total")
                            .Help(
                                "Data-plane TLS handshakes that failed (refused certificate, "
                                "PSK mismatch, no answer by the deadline), either side")
                            .Register(r)
                            .Add({});
  for (auto [family, direction] : {std::pair{&impl->transport_sent, "sent"},
                                   std::pair{&impl->transport_received, "received"}}) {
    *family = &prometheus::BuildCounter()
                   .Name(std::string("tributary_transport_bytes_") + direction + "_total")
                   .Help(std::string("Data-plane bytes ") + direction + ", by transport (shm, tcp)")
                   .Register(r);
  }
  impl->path_changes =
      &prometheus::BuildCounter()
           .Name("tributary_link_fallbacks_total")
           .Help(
               "Times the link to a peer moved from one data path to another (--failover), "
               "by peer, path names and cause (error, stall, peer: the peer moved first; "
               "waiting: every path failed with an error and the pair waits for a new "
               "connection); to=none: every path to the peer failed")
           .Register(r);
  impl->path_recoveries =
      &prometheus::BuildCounter()
           .Name("tributary_link_recoveries_total")
           .Help("Times the link to a peer moved back up to a better data path that had "
                 "stalled and answers again (--failover), by peer and path names")
           .Register(r);
  impl->reconnects = &prometheus::BuildCounter()
                         .Name("tributary_link_reconnects_total")
                         .Help("New connections made for data paths whose connection failed "
                               "with an error (re-dialled in the background, same handshake), "
                               "handed to the link, which moves the pair back up once a probe "
                               "is answered on it")
                         .Register(r)
                         .Add({});
  impl->federated_rounds =
      &prometheus::BuildCounter()
           .Name("tributary_federated_rounds_total")
           .Help("Federated rounds this member took part in, by outcome: contributed (its "
                 "update is in the result), late (the round closed without it), failed "
                 "(below min_participants)")
           .Register(r);
  for (const char* outcome : {"contributed", "late", "failed"}) {
    impl->federated_rounds->Add({{"outcome", outcome}});
  }
  impl->result_repairs =
      &prometheus::BuildCounter()
           .Name("tributary_result_repairs_total")
           .Help("Small all-reduces this member lacked after a failure while another member "
                 "had returned them: received (from that member's copy) or re-run (no "
                 "member of the new view held one)")
           .Register(r);
  for (const char* outcome : {"received", "re-run"}) {
    impl->result_repairs->Add({{"outcome", outcome}});
  }
  impl->peer_transport =
      &prometheus::BuildGauge()
           .Name("tributary_peer_transport")
           .Help("1 for the transport that carries each peer of the current group, else 0")
           .Register(r);
  return std::unique_ptr<AgentMetrics>(new AgentMetrics(std::move(impl)));
}

AgentMetrics::AgentMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AgentMetrics::~AgentMetrics() = default;

std::uint16_t AgentMetrics::port() const { return impl_->port; }
prometheus::Registry& AgentMetrics::registry() { return *impl_->registry; }

void AgentMetrics::record_collective(std::string_view op, std::string_view algorithm,
                                     const Status& result, double seconds) {
  const std::string result_label(result.is_ok() ? "ok" : to_string(result.code()));
  impl_->collectives
      ->Add({{"op", std::string(op)},
             {"algorithm", std::string(algorithm)},
             {"result", result_label}})
      .Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1, 3, 10};
  impl_->latency->Add({{"op", std::string(op)}}, kBuckets).Observe(seconds);
}

void AgentMetrics::record_federated_round(std::string_view outcome) {
  impl_->federated_rounds->Add({{"outcome", std::string(outcome)}}).Increment();
}

void AgentMetrics::record_result_repair(std::string_view outcome) {
  impl_->result_repairs->Add({{"outcome", std::string(outcome)}}).Increment();
}

void AgentMetrics::sync_links(const std::vector<PeerPath>& paths, const FrameRefusals& refusals,
                              const std::vector<PathChangeCount>& path_changes,
                              std::uint64_t reconnects) {
  if (reconnects > impl_->seen_reconnects) {
    impl_->reconnects->Increment(static_cast<double>(reconnects - impl_->seen_reconnects));
    impl_->seen_reconnects = reconnects;
  }
  for (const PathChangeCount& c : path_changes) {
    std::uint64_t& seen = impl_->seen_changes[{c.peer, c.from, c.to, c.cause}];
    if (c.count > seen && c.cause == "recovered") {
      impl_->path_recoveries->Add({{"peer", c.peer}, {"from", c.from}, {"to", c.to}})
          .Increment(static_cast<double>(c.count - seen));
      seen = c.count;
    } else if (c.count > seen) {
      impl_->path_changes
          ->Add({{"peer", c.peer}, {"from", c.from}, {"to", c.to}, {"cause", c.cause}})
          .Increment(static_cast<double>(c.count - seen));
      seen = c.count;
    }
  }
  for (prometheus::Gauge* g : impl_->path_gauges) g->Set(0);
  impl_->path_gauges.clear();
  for (const auto& p : paths) {
    auto& [sent, received] = impl_->seen[{p.transport, p.address}];
    // A new epoch's link restarts its counters from zero.
    if (p.bytes_sent < sent || p.bytes_received < received) sent = received = 0;
    const auto more_sent = static_cast<double>(p.bytes_sent - sent);
    const auto more_received = static_cast<double>(p.bytes_received - received);
    impl_->bytes_sent->Add({{"peer", p.address}}).Increment(more_sent);
    impl_->bytes_received->Add({{"peer", p.address}}).Increment(more_received);
    impl_->transport_sent->Add({{"transport", p.transport}}).Increment(more_sent);
    impl_->transport_received->Add({{"transport", p.transport}}).Increment(more_received);
    sent = p.bytes_sent;
    received = p.bytes_received;
    if (!p.in_use) continue;
    prometheus::Gauge& g = impl_->peer_transport->Add(
        {{"peer", p.address}, {"member", std::to_string(p.member)}, {"transport", p.transport}});
    g.Set(1);
    impl_->path_gauges.push_back(&g);
  }
  // Endpoint lifetime totals: monotonic.
  FrameRefusals& seen = impl_->seen_refusals;
  impl_->bad_frames->Increment(static_cast<double>(refusals.bad_frames - seen.bad_frames));
  impl_->crc_failures->Increment(static_cast<double>(refusals.crc_failures - seen.crc_failures));
  impl_->tls_failures->Increment(static_cast<double>(refusals.tls_failures - seen.tls_failures));
  seen = refusals;
}

}  // namespace tributary::agent
