// The coordinator's state and its thread, private to coordinator/. Its parts, by concern:
//   coordinator.cc       bind (sockets, metrics, journal replay), the service loop that
//                        polls and ticks, snapshots, and the public Coordinator
//   leadership.cc        the store (journal or etcd), leader election, standing by
//   transport_security.cc  CURVE on the ROUTER, the ZAP handler, the handshake monitor
//   admission.cc         the join / resume handshake: requests, proofs, admission
//   message_handlers.cc  the other messages, and carrying out membership decisions
//   status_requests.cc   `tributary status`: challenge, proof, the report (read-only)
//
// Methods run on the coordinator thread only, except the snapshot accessors, which take
// snapshot_mu_.
#pragma once

#include <prometheus/registry.h>

#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

#include "control/codec.h"
#include "control/curve_keys.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/join_gate.h"
#include "coordinator/status_gate.h"
#include "coordinator/status_report.h"
#include "coordinator_store/store.h"
#include "core/hash.h"
#include "core/log_limiter.h"
#include "core/metrics_server.h"
#include "membership/federated_rounds.h"
#include "membership/membership.h"

namespace tributary::coordinator {

// Remembers the last `capacity` dropped connections; older ones are forgotten (their
// identities are random per connection and are not reused by ZeroMQ anyway).
class BoundedSet {
 public:
  explicit BoundedSet(std::size_t capacity) : capacity_(capacity) {}
  bool contains(const std::string& key) const { return set_.contains(key); }
  void insert(const std::string& key) {
    if (!set_.insert(key).second) return;
    order_.push_back(key);
    if (order_.size() > capacity_) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  std::size_t capacity_;
  std::unordered_set<std::string> set_;
  std::deque<std::string> order_;
};

class Coordinator::Service {
 public:
  Service(CoordinatorConfig config, Logger log, const Clock& clock);

  std::uint64_t instance_id() const { return instance_id_; }

  Status bind();
  void run_until(const std::atomic<bool>& stop);

  std::string endpoint() const {
    std::lock_guard lock(snapshot_mu_);
    return endpoint_;
  }
  int metrics_port() const {
    std::lock_guard lock(snapshot_mu_);
    return metrics_port_;
  }
  membership::View current_view() const {
    std::lock_guard lock(snapshot_mu_);
    return view_snapshot_;
  }
  std::size_t member_count() const {
    std::lock_guard lock(snapshot_mu_);
    return member_count_;
  }
  bool bound() const {
    return router_.handle() != nullptr && (membership_.has_value() || store_ != nullptr);
  }
  bool leading() const {
    std::lock_guard lock(snapshot_mu_);
    return leading_snapshot_;
  }

 private:
  using MemberId = membership::MemberId;

  struct Peer {
    std::string identity;  // the ROUTER routing id of the connection
    std::string address;   // the remote IP, when ZeroMQ knows it
    int fd = -1;           // the connection's socket (ZMQ_SRCFD), when ZeroMQ knows it
    std::string name() const {
      return to_hex(std::as_bytes(std::span(identity))) + (address.empty() ? "" : "@" + address);
    }
  };

  // coordinator.cc
  // false when the view could not be recorded because leadership is lost (stood down):
  // then nothing may be sent.
  bool journal_view(const membership::View& view, const membership::ViewChange& change);
  // Reads up to a batch of messages (ZeroMQ queues them fairly across connections).
  void drain_router();
  // Handshake expiry, the refusal log's summaries and membership's timeouts.
  void tick();

  // transport_security.cc
  // CURVE server keys, the ZAP domain and the handshake deadline on the ROUTER; the ZAP
  // handler bound in its context; the monitor of failed handshakes. Throws zmq::error_t.
  void secure_router();
  void drain_monitor();
  void on_monitor_event(std::uint16_t id, std::uint32_t value);
  std::string describe_handshake_failure(std::uint16_t id, std::uint32_t value);
  // Logs the failure seen last, naming the connection's address.
  void flush_handshake_failure(const std::string& address);
  void drain_zap();
  // A line about a peer that failed to authenticate or broke the protocol, rate-limited
  // per kind of refusal (core/log_limiter.h).
  void refusal(std::string_view kind, const std::string& line);
  void publish_snapshot();
  // The base heartbeat interval (configured, or a third of the timeout).
  Duration interval() const {
    return config_.heartbeat_interval > Duration::zero() ? config_.heartbeat_interval
                                                         : config_.heartbeat_timeout / 3;
  }
  // The interval members are asked for now (paced with the membership's size), in ms.
  std::uint32_t interval_ms() const;

  // leadership.cc: the store, the election, standing by
  Status open_store(const std::string& bound);
  // Builds the membership from what the store remembers; this process issues views now.
  void lead(coordinator_store::StoredState state);
  // One turn of the loop while another coordinator leads: campaign when due, answer
  // everything NotLeader.
  void stand_by();
  // False (having stood down) when the store says we no longer lead.
  bool still_leading();
  void step_down(const Status& why);
  // ok -> true; kAborted (leadership lost) -> stands down, false; other errors (a local
  // journal's I/O) are logged and the record counts as done: true.
  bool recorded(const Status& st, const std::string& what);
  void answer_not_leader(const Peer& peer);

  // admission.cc
  // A JoinRequest, or the labels of a ResumeRequest of member `resume_id`: answered with
  // a Challenge (or JoinRejected).
  void on_admission_request(const Peer& peer, const control::JoinRequest& request,
                            MemberId resume_id);
  void on_join_proof(const Peer& peer, const control::JoinProof& proof);
  // A verified proof: the membership decides; JoinAccepted (or JoinRejected) answers.
  void admit(const Peer& peer, const JoinGate::Admitted& admitted, TimePoint now);
  void reject(const Peer& peer, control::JoinRejected::Kind kind, const std::string& reason);

  // status_requests.cc
  void on_status_request(const Peer& peer, const control::StatusRequest& request);
  void on_status_proof(const Peer& peer, const control::StatusProof& proof);
  void deny_status(const Peer& peer, const std::string& reason);
  std::int64_t unix_ms() const;  // the wall clock, for the history of view changes
  // Records the decisions for the status history and journals the view they issue;
  // false when leadership is lost (then nothing may be sent).
  bool record_view(const membership::Decisions& decisions);

  // message_handlers.cc
  void handle(const Peer& peer, const control::Envelope& env);
  void on_heartbeat(const Peer& peer, const control::Heartbeat& heartbeat);
  void on_leave(const Peer& peer, const control::Leave& leave);
  void on_failure_report(const Peer& peer, const control::FailureReport& report);
  // The member behind this connection, if `claimed` is its id; otherwise drops the
  // connection as malformed (an impersonation attempt) or ignores a non-member.
  std::optional<MemberId> sender(const Peer& peer, MemberId claimed, std::string_view what);
  void drop_malformed(const Peer& peer, const std::string& why);
  // Carries out membership decisions; the view is not pushed to `skip` (who got it in
  // its JoinAccepted).
  void apply(const membership::Decisions& decisions, MemberId skip = 0, bool journaled = false);
  void apply_removal(const membership::Removal& removal);
  void broadcast_view(const membership::View& view, membership::ViewCause cause, MemberId skip);
  void send_go(const membership::GoDecision& go);
  // Federated rounds: the round logic's output (decisions to the view, replies, commits).
  void on_round_ready(const Peer& peer, const control::RoundReady& ready);
  void apply_rounds(const membership::RoundOutput& out);
  // Asks every member of the current view to heartbeat now (a failure report's check).
  void send_probe();
  void send(const std::string& identity, const control::Envelope& env);
  // Sends bytes already encoded (a view or Go is encoded once for all its recipients).
  void send_encoded(const std::string& identity, const std::string& bytes);
  // The current view, encoded once per epoch for the broadcast and every resend, and
  // the delta to it from the view encoded before (membership/view_delta.h).
  struct EncodedView {
    membership::Epoch epoch = 0;
    std::string full;
    membership::Epoch base_epoch = 0;  // the delta applies to this epoch's view
    std::string delta;                 // empty: no delta (first view, or not expressible)
  };
  const EncodedView& encoded_view();
  std::optional<MemberId> member_of(const std::string& identity) const {
    auto it = member_of_.find(identity);
    return it == member_of_.end() ? std::nullopt : std::optional<MemberId>(it->second);
  }
  void forget_member(MemberId id);

  CoordinatorConfig config_;
  // Its context carries no member; publish_snapshot() keeps its epoch at the current view's.
  Logger log_;
  const Clock& clock_;
  std::uint64_t instance_id_ = 0;
  std::optional<membership::Membership> membership_;  // built by bind(), after the journal replay
  membership::FederatedRounds rounds_;  // not journaled: a new leader starts with none
  std::unique_ptr<coordinator_store::CoordinatorStore> store_;  // null: remembers nothing
  bool leading_ = false;
  TimePoint next_campaign_{};
  std::string standby_reason_;  // the last campaign's outcome, logged when it changes
  std::string known_leader_;
  JoinGate gate_;
  StatusGate status_gate_;
  StatusTracker status_;
  TimePoint started_at_{};
  std::unordered_map<std::string, MemberId> member_of_;  // routing id -> member
  std::unordered_map<MemberId, std::string> route_of_;   // member -> routing id
  EncodedView encoded_view_;
  membership::View delta_base_;  // the view encoded last: the next epoch's delta base
  BoundedSet blocked_;
  control::ClusterCurveKeys keys_;
  LogLimiter refusals_;
  std::unordered_map<int, std::string> accepted_;  // fd of an accepted connection -> address
  // The connection each member's heartbeats come over, so that its closing (the member's
  // kernel closed the socket: it died) reaches Membership::connection_closed.
  std::unordered_map<int, MemberId> member_on_fd_;
  std::string failed_handshake_;  // why the last handshake failed, until its DISCONNECTED

  zmq::context_t context_{1};
  zmq::socket_t zap_;  // bound before the ROUTER, so no connection slips past it
  zmq::socket_t router_;
  zmq::socket_t monitor_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<CoordinatorMetrics> metrics_ = std::make_unique<CoordinatorMetrics>(*registry_);

  mutable std::mutex snapshot_mu_;
  std::string endpoint_;
  int metrics_port_ = 0;
  membership::View view_snapshot_;
  std::size_t member_count_ = 0;
  bool leading_snapshot_ = false;
};

}  // namespace tributary::coordinator
