// The coordinator service: owns membership and talks to agents over ZeroMQ.
//
// One ROUTER socket, one thread. The thread polls with a timeout bounded by the next
// heartbeat expiry (and by 50 ms, so stop() is prompt), decodes Envelopes, runs the
// challenge-response join (coordinator/join_gate.h), feeds events to the pure
// membership::Membership and carries out its decisions: replies, Evicted notices, and
// every new View pushed to every member.
//
// Guarantees (docs/security.md):
//  - Nothing reaches the coordinator's logic before the peer proves the cluster secret:
//    the ROUTER speaks CURVE with keys derived from the secret (control/curve_keys.h) and
//    a ZAP handler admits only the cluster's client key. Every control message after
//    that is encrypted and authenticated by CURVE (an on-path proxy can neither read nor
//    inject). A ZeroMQ handshake that does not complete within `handshake_timeout` is
//    closed (idle connections, wrong secrets, raw bytes).
//  - The secret never travels. The join's challenge-response (join_gate.h) proves it once
//    more end to end; a wrong proof gets JoinRejected{AUTH_FAILED}.
//  - Routing ids are not guessable: libzmq numbers peers from rand(), which nobody seeds
//    (the same ids every run); bind() seeds it from the OS's random bytes, so no peer can
//    claim the id libzmq will give the next connection (libzmq aborts on that collision).
//  - Bad input hurts only its sender: a message that does not decode (oversized, not a
//    protobuf Envelope, unknown message type, more than one frame, an agent sending a
//    coordinator-only message, a heartbeat or leave for another member's id, an
//    impossible value) is logged as "dropped malformed message from <peer>: <why>",
//    counted, and from then on that connection is ignored (and removed, if it was a
//    member). Refusals of every kind are rate-limited in the log (core/log_limiter.h).
//  - Bounded: at most `max_pending_joins` open join handshakes, at most
//    `max_pending_joins_per_source` from one address, `max_message_bytes` per frame.
//  - Nothing blocks: sends are non-blocking (a peer that does not read loses messages;
//    it catches up through the view resent on its next heartbeat).
//
// The fault-tolerance protocol (docs/fault-tolerance.md) is decided by the pure
// membership::Membership; this service only routes messages to it and carries out its
// Decisions: Evicted / LeaveAck to the removed, the journal record (fsync'ed) and then the
// View to every member, Go to the Ready, log lines and metrics.
//
// Restarts: with `journal_path` set, bind() replays the journal, never reissues a
// journaled epoch, and waits up to `resume_timeout` for the journaled members to Resume
// (challenge-response naming their member id) before issuing the next view. Every
// coordinator process has a random instance id (in JoinAccepted, HeartbeatAck and
// Evicted) so that agents can tell a restart from an eviction.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"
#include "membership/straggler_policy.h"
#include "membership/view.h"

namespace tributary::coordinator {

struct CoordinatorConfig {
  // "tcp://HOST:PORT"; port 0 or * binds an ephemeral port (read it back with endpoint()).
  std::string bind_address = "tcp://127.0.0.1:0";
  std::string secret;                                    // required
  std::size_t initial_world_size = 1;                    // members needed before the first view
  // One job after another: a world that emptied forms again from initial_world_size new
  // members (membership::MembershipConfig::reform_when_empty; --serve-jobs).
  bool serve_jobs = false;
  Duration heartbeat_timeout = std::chrono::seconds(1);  // silent this long: removed
  Duration heartbeat_interval = std::chrono::milliseconds(100);  // advertised; zero: timeout / 3
  Duration confirm_silence{0};  // failure reports: zero = 3 heartbeat intervals
  // A reported member whose control connection closed is confirmed at once
  // (Membership::connection_closed). Off for a coordinator behind something that closes
  // connections on its own (a proxy restarting), where a close does not mean a death.
  bool confirm_on_close = true;
  // The heartbeat budget: beyond this many heartbeats a second the interval members are
  // asked for grows with the membership (membership/heartbeat_pace.h); 0: never.
  double max_heartbeat_rate = 10000;
  Duration ready_timeout = std::chrono::seconds(2);     // Ready after a view, or removed
  Duration boundary_timeout = std::chrono::seconds(2);  // boundary requests from everyone
  Duration resume_timeout = std::chrono::seconds(3);    // after a restart: resumes
  membership::StragglerConfig straggler;
  std::string journal_path;  // empty: no journal (a restart forgets everything)
  Duration join_timeout = std::chrono::seconds(5);  // a started handshake must finish in this
  // The ZeroMQ (ZMTP + CURVE) handshake of a new connection must finish in this.
  Duration handshake_timeout = std::chrono::seconds(2);
  std::size_t max_members = 4096;
  std::size_t max_pending_joins = 1024;
  std::size_t max_pending_joins_per_source = 64;  // per remote IP address
  std::size_t max_message_bytes = 1 << 20;        // larger messages drop the connection
  // "HOST:PORT" for Prometheus /metrics (port 0: ephemeral, see metrics_port()); empty: none.
  // Served by core/metrics_server.h (slow or many clients cannot starve it).
  std::string metrics_address = "127.0.0.1:0";
  // Replicated coordinators (docs/fault-tolerance.md): etcd client URLs; empty: the local
  // journal (or nothing). With etcd, several coordinators share `etcd_prefix`; the one
  // holding the leader lease serves, the others answer NotLeader until they win it.
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix = "/tributary/default";
  Duration lease_ttl =
      std::chrono::seconds(2);  // whole seconds: a dead leader's successor waits this
  std::string advertise;  // the endpoint agents dial for this coordinator; empty: the bound one
  membership::Epoch last_epoch = 0;         // floor under the journal's: first view gets > this
  membership::MemberId last_member_id = 0;  // floor under the journal's: ids continue after it
};

// kInvalidArgument naming the field, for configs that cannot work.
Status validate(const CoordinatorConfig& config);

class Coordinator {
 public:
  // `clock` drives heartbeat expiry and handshake timeouts; it must outlive the
  // coordinator. Tests may pass a FakeClock. `log` gets every decision and every dropped
  // peer; the coordinator keeps the epoch of its context at the current view's (so give
  // it a context of its own, as the default does: no member, it is nobody's).
  explicit Coordinator(CoordinatorConfig config, Logger log = Logger("coordinator"),
                       const Clock& clock = SteadyClock::instance());
  ~Coordinator();  // stop()s
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Validates the config, binds the ROUTER socket and the metrics endpoint.
  // kInvalidArgument for a bad config; kUnavailable when an address cannot be bound.
  Status bind();
  // Serves on the calling thread until `stop` becomes true (checked at least every 50 ms).
  // Requires a successful bind().
  void run_until(const std::atomic<bool>& stop);
  // bind() (if not done yet) and run_until() on a thread of its own.
  Status start();
  // Stops the thread started by start(); idempotent.
  void stop();

  // "tcp://127.0.0.1:40123": the bound endpoint agents connect to (empty before bind()).
  std::string endpoint() const;
  // The bound /metrics port (0 when disabled or before bind()).
  int metrics_port() const;
  // Thread-safe snapshots, for tests and admin tools.
  membership::View current_view() const;
  std::size_t member_count() const;
  // False while a replicated coordinator stands by (another one holds the lease).
  bool leading() const;
  // Random per Coordinator object; agents notice a restart by its change.
  std::uint64_t instance_id() const;

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tributary::coordinator
