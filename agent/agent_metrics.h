// The agent's Prometheus series, served on WorkerConfig::metrics_bind:
//   tributary_collectives_total{op,algorithm,result}   collectives run, by outcome
//   tributary_federated_rounds_total{outcome}            contributed, late, failed
//   tributary_result_repairs_total{outcome}              received, re-run (view changes)
//   tributary_collective_seconds{op}                     latency histogram
//   tributary_link_bytes_sent_total{peer}, _received_total{peer}   data-plane bytes by peer
//   tributary_link_bad_frames_total, tributary_link_crc_failures_total   frames refused
//   tributary_link_tls_failures_total                    TLS handshakes failed (--tls)
//   tributary_transport_bytes_sent_total{transport}, _received_total{transport}   by transport
//   tributary_peer_transport{peer,member,transport}      1 for the path carrying each peer
//   tributary_link_fallbacks_total{peer,from,to,cause}   links moved between paths (--failover)
//   tributary_link_recoveries_total{peer,from,to}        ... back up to a better path
//   tributary_link_reconnects_total                      failed paths re-dialled (path_redialer.h)
//   tributary_membership_size, tributary_epoch           from the coordinator client
// Updated only from the collective thread (or the idle recovery, while no call runs); the server's thread (core/metrics_server.h, which
// slow or many scrapers cannot block) only reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <vector>

#include "agent/data_plane.h"
#include "core/log.h"
#include "core/status.h"

namespace prometheus {
class Registry;
}

namespace tributary::agent {

class AgentMetrics {
 public:
  // bind: "127.0.0.1:0" for an ephemeral port. `log` gets the server's refusals.
  static Result<std::unique_ptr<AgentMetrics>> serve(const std::string& bind, Logger log);
  ~AgentMetrics();

  std::uint16_t port() const;
  prometheus::Registry& registry();

  void record_collective(std::string_view op, std::string_view algorithm, const Status& result,
                         double seconds);
  // A federated round's outcome for this member: "contributed", "late" or "failed".
  void record_federated_round(std::string_view outcome);
  // A view change's repair step found this member lacking a small all-reduce another member
  // returned: "received" (from that member's copy) or "re-run" (no member held one).
  void record_result_repair(std::string_view outcome);
  // Folds the current group's cumulative per-peer byte counts and the data plane's
  // lifetime refusals into the counters, and points each peer's path gauge at the
  // transport carrying it.
  // `reconnects`: DataPlane::reconnects(), monotonic.
  void sync_links(const std::vector<PeerPath>& paths, const FrameRefusals& refusals,
                  const std::vector<PathChangeCount>& path_changes = {},
                  std::uint64_t reconnects = 0);

  class Impl;

 private:
  explicit AgentMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary::agent
