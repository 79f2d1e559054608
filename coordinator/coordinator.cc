#include "coordinator/coordinator.h"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <zmq.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <zmq.hpp>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/join_gate.h"
#include "core/check.h"
#include "membership/control_codec.h"
#include "membership/journal.h"
#include "membership/membership.h"

namespace tributary::coordinator {
namespace {

using membership::MemberId;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr milliseconds kMaxPollWait{50};
constexpr std::size_t kMaxBlocked = 4096;
constexpr std::size_t kMaxMessagesPerWake = 256;  // then run ticks, so a flood cannot starve expiry
constexpr const char* kMonitorEndpoint = "inproc://tributary-coordinator-monitor";

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// ZeroMQ wants '*' for "any port"; accept the conventional 0 as well.
std::string zmq_bind_address(const std::string& address) {
  if (address.size() > 2 && address.ends_with(":0"))
    return address.substr(0, address.size() - 1) + "*";
  return address;
}

// Remembers the last kMaxBlocked dropped connections; older ones are forgotten (their
// identities are random per connection and are not reused by ZeroMQ anyway).
class BoundedSet {
 public:
  bool contains(const std::string& key) const { return set_.contains(key); }
  void insert(const std::string& key) {
    if (!set_.insert(key).second) return;
    order_.push_back(key);
    if (order_.size() > kMaxBlocked) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  std::unordered_set<std::string> set_;
  std::deque<std::string> order_;
};

}  // namespace

Status validate(const CoordinatorConfig& c) {
  auto bad = [](std::string what) {
    return error(StatusCode::kInvalidArgument, "coordinator config: " + what);
  };
  if (c.secret.empty()) return bad("secret is empty");
  if (!c.bind_address.starts_with("tcp://"))
    return bad("bind_address '" + c.bind_address + "' is not tcp://HOST:PORT");
  if (c.initial_world_size < 1) return bad("initial_world_size must be >= 1");
  if (c.initial_world_size > c.max_members) return bad("initial_world_size exceeds max_members");
  if (c.heartbeat_timeout <= Duration::zero()) return bad("heartbeat_timeout must be positive");
  if (c.heartbeat_interval < Duration::zero() || c.heartbeat_interval >= c.heartbeat_timeout) {
    return bad("heartbeat_interval must be below heartbeat_timeout");
  }
  if (c.join_timeout <= Duration::zero()) return bad("join_timeout must be positive");
  if (c.max_message_bytes < 1024) return bad("max_message_bytes below 1024");
  if (c.max_pending_joins < 1) return bad("max_pending_joins must be >= 1");
  if (c.confirm_silence < Duration::zero()) return bad("confirm_silence must be >= 0");
  if (c.ready_timeout <= Duration::zero()) return bad("ready_timeout must be positive");
  if (c.boundary_timeout <= Duration::zero()) return bad("boundary_timeout must be positive");
  if (c.resume_timeout <= Duration::zero()) return bad("resume_timeout must be positive");
  if (Status st = membership::validate(c.straggler); !st) return bad(st.message());
  return Status::ok();
}

// Everything the coordinator thread owns. Methods run on that thread only, except the
// snapshot accessors, which take snapshot_mu_.
class Coordinator::Service {
 public:
  Service(CoordinatorConfig config, membership::LogSink log, const Clock& clock)
      : config_(std::move(config)),
        log_(log ? std::move(log) : [](std::string_view) {}),
        clock_(clock),
        gate_(config_.secret, config_.join_timeout, config_.max_pending_joins) {
    const Nonce r = random_nonce();
    for (int i = 0; i < 8; ++i) instance_id_ = (instance_id_ << 8) | r[static_cast<std::size_t>(i)];
    if (instance_id_ == 0) instance_id_ = 1;
  }

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
  bool bound() const { return router_.handle() != nullptr && membership_.has_value(); }

 private:
  struct Peer {
    std::string identity;  // the ROUTER routing id of the connection
    std::string address;   // the remote IP, when ZeroMQ knows it
    std::string name() const { return hex(identity) + (address.empty() ? "" : "@" + address); }
  };

  void drain_router();
  void drain_monitor();
  void handle(const Peer& peer, const control::Envelope& env);
  void on_join_request(const Peer& peer, const control::JoinRequest& request);
  void on_join_proof(const Peer& peer, const control::JoinProof& proof);
  void on_heartbeat(const Peer& peer, const control::Heartbeat& heartbeat);
  void on_leave(const Peer& peer, const control::Leave& leave);
  void on_resume_request(const Peer& peer, const control::ResumeRequest& request);
  // The member behind this connection, if `claimed` is its id; otherwise drops the
  // connection as malformed (an impersonation attempt) or ignores a non-member.
  std::optional<MemberId> sender(const Peer& peer, MemberId claimed, std::string_view what);
  Duration interval() const {
    return config_.heartbeat_interval > Duration::zero() ? config_.heartbeat_interval
                                                         : config_.heartbeat_timeout / 3;
  }
  Status open_journal();
  void journal_view(const membership::View& view);
  void drop_malformed(const Peer& peer, const std::string& why);
  void reject(const Peer& peer, control::JoinRejected::Kind kind, const std::string& reason);
  // Carries out membership decisions; the view is not pushed to `skip` (who got it in
  // its JoinAccepted).
  void apply(const membership::Decisions& decisions, MemberId skip = 0, bool journaled = false);
  void send(const std::string& identity, const control::Envelope& env);
  void publish_snapshot();
  std::optional<MemberId> member_of(const std::string& identity) const {
    auto it = member_of_.find(identity);
    return it == member_of_.end() ? std::nullopt : std::optional<MemberId>(it->second);
  }
  void forget_member(MemberId id);

  CoordinatorConfig config_;
  membership::LogSink log_;
  const Clock& clock_;
  std::uint64_t instance_id_ = 0;
  std::optional<membership::Membership> membership_;  // built by bind(), after the journal replay
  std::unique_ptr<membership::Journal> journal_;
  JoinGate gate_;
  std::unordered_map<std::string, MemberId> member_of_;  // routing id -> member
  std::unordered_map<MemberId, std::string> route_of_;   // member -> routing id
  BoundedSet blocked_;

  zmq::context_t context_{1};
  zmq::socket_t router_;
  zmq::socket_t monitor_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<CoordinatorMetrics> metrics_ = std::make_unique<CoordinatorMetrics>(*registry_);

  mutable std::mutex snapshot_mu_;
  std::string endpoint_;
  int metrics_port_ = 0;
  membership::View view_snapshot_;
  std::size_t member_count_ = 0;
};

Status Coordinator::Service::bind() {
  if (bound())
    return error(StatusCode::kInvalidArgument, "coordinator already bound to " + endpoint());
  TRIB_RETURN_IF_ERROR(validate(config_));
  TRIB_RETURN_IF_ERROR(open_journal());
  std::string bound;
  try {
    router_ = zmq::socket_t(context_, zmq::socket_type::router);
    router_.set(zmq::sockopt::linger, 0);
    // libzmq itself drops a connection that sends a larger message, before we see it.
    router_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(config_.max_message_bytes));
    if (zmq_socket_monitor(
            router_.handle(), kMonitorEndpoint,
            ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
      throw zmq::error_t();
    }
    monitor_ = zmq::socket_t(context_, zmq::socket_type::pair);
    monitor_.connect(kMonitorEndpoint);
    router_.bind(zmq_bind_address(config_.bind_address));
    bound = router_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    router_ = zmq::socket_t();
    return error(StatusCode::kUnavailable,
                 "cannot bind coordinator to " + config_.bind_address + ": " + e.what());
  }
  int port = 0;
  if (!config_.metrics_address.empty()) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(config_.metrics_address);
      exposer_->RegisterCollectable(registry_);
      // civetweb binds port 0 to an ephemeral port and reports the real one here.
      const auto ports = exposer_->GetListeningPorts();
      port = ports.empty() ? 0 : ports.front();
    } catch (const std::exception& e) {
      router_ = zmq::socket_t();
      return error(StatusCode::kUnavailable,
                   "cannot serve metrics on " + config_.metrics_address + ": " + e.what());
    }
  }
  {
    std::lock_guard lock(snapshot_mu_);
    endpoint_ = bound;
    metrics_port_ = port;
  }
  publish_snapshot();
  log_("listening on " + bound +
       (port ? ", metrics on port " + std::to_string(port) : std::string()) +
       ", initial world size " + std::to_string(config_.initial_world_size) +
       ", heartbeat timeout " +
       std::to_string(duration_cast<milliseconds>(config_.heartbeat_timeout).count()) +
       " ms, instance " + std::to_string(instance_id_));
  return Status::ok();
}

Status Coordinator::Service::open_journal() {
  membership::MembershipConfig mc;
  mc.initial_world_size = config_.initial_world_size;
  mc.heartbeat_timeout = config_.heartbeat_timeout;
  mc.max_members = config_.max_members;
  mc.last_epoch = config_.last_epoch;
  mc.last_member_id = config_.last_member_id;
  mc.confirm_silence =
      config_.confirm_silence > Duration::zero() ? config_.confirm_silence : 3 * interval();
  mc.ready_timeout = config_.ready_timeout;
  mc.boundary_timeout = config_.boundary_timeout;
  mc.resume_timeout = config_.resume_timeout;
  mc.straggler = config_.straggler;
  membership::JournalState state;
  if (!config_.journal_path.empty()) {
    auto journal = membership::Journal::open(config_.journal_path, &state);
    if (!journal) return journal.status();
    journal_ = std::move(journal).value();
    if (!state.warning.empty()) {
      log_("journal " + config_.journal_path + ": ignored a bad tail after " +
           std::to_string(state.records) + " good records: " + state.warning);
    }
    log_("journal " + config_.journal_path + ": " + std::to_string(state.records) +
         " records, last epoch " + std::to_string(state.last_epoch) + ", last member id " +
         std::to_string(state.last_member_id) + ", " + std::to_string(state.members.size()) +
         " members to resume");
    mc.last_epoch = std::max(mc.last_epoch, state.last_epoch);
    mc.last_member_id = std::max(mc.last_member_id, state.last_member_id);
  }
  membership_.emplace(mc);
  if (!state.members.empty()) {
    std::vector<std::pair<MemberId, membership::MemberLabels>> members;
    for (auto& m : state.members) members.emplace_back(m.id, std::move(m.labels));
    membership_->restore(std::move(members), clock_.now());
  }
  return Status::ok();
}

// Written and fsync'ed before the view reaches anyone: a restarted coordinator never
// reissues an epoch somebody saw.
void Coordinator::Service::journal_view(const membership::View& view) {
  if (!journal_) return;
  membership::JournalEntry entry;
  entry.epoch = view.epoch;
  entry.last_member_id = membership_->last_member_id();
  for (const auto& m : view.members) {
    const auto* p = membership_->find(m.id);
    membership::MemberLabels labels =
        p ? p->labels
          : membership::MemberLabels{"", m.host, m.zone, m.data_address, m.capabilities};
    entry.members.push_back({m.id, std::move(labels)});
  }
  if (Status st = journal_->append(entry); !st)
    log_("JOURNAL WRITE FAILED (a restart may forget this view): " + st.to_string());
}

void Coordinator::Service::run_until(const std::atomic<bool>& stop) {
  TRIB_CHECK(bound()) << "run_until() before a successful bind()";
  while (!stop.load()) {
    try {
      const TimePoint now = clock_.now();
      const TimePoint next = membership_->next_expiry();
      const Duration wait =
          next <= now ? Duration::zero() : std::min<Duration>(next - now, kMaxPollWait);
      zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      // Round up so a sub-millisecond wait does not spin.
      zmq::poll(items, 2, duration_cast<milliseconds>(wait + milliseconds(1) - Duration{1}));
      if (items[1].revents & ZMQ_POLLIN) drain_monitor();
      if (items[0].revents & ZMQ_POLLIN) drain_router();
      const TimePoint after = clock_.now();
      gate_.expire(after);
      apply(membership_->tick(after));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR) log_(std::string("zeromq error in the coordinator loop: ") + e.what());
    }
  }
}

void Coordinator::Service::drain_router() {
  for (std::size_t n = 0; n < kMaxMessagesPerWake; ++n) {
    zmq::message_t identity;
    if (!router_.recv(identity, zmq::recv_flags::dontwait)) return;
    // A DEALER sends one frame per message, which the ROUTER prefixes with the routing
    // id. Read every frame (ZeroMQ delivers messages whole) but keep only the first.
    zmq::message_t payload;
    zmq::message_t extra;
    std::size_t frames = 1;
    bool more = identity.more();
    if (more) {
      (void)router_.recv(payload, zmq::recv_flags::none);
      ++frames;
      more = payload.more();
    }
    while (more) {
      (void)router_.recv(extra, zmq::recv_flags::none);
      ++frames;
      more = extra.more();
    }
    Peer peer{identity.to_string(), {}};
    if (frames >= 2) {
      if (const char* addr = zmq_msg_gets(payload.handle(), "Peer-Address")) peer.address = addr;
    }
    if (blocked_.contains(peer.identity)) continue;
    if (frames != 2) {
      drop_malformed(peer, "message of " + std::to_string(frames - 1) + " frames, expected 1");
      continue;
    }
    auto decoded = membership::decode_envelope(payload.to_string_view(), config_.max_message_bytes);
    if (!decoded) {
      drop_malformed(peer, decoded.status().message());
      continue;
    }
    handle(peer, *decoded);
  }
}

void Coordinator::Service::drain_monitor() {
  zmq::message_t event;
  while (monitor_.recv(event, zmq::recv_flags::dontwait)) {
    // Event frame: 16-bit event id + 32-bit value; then a frame with the peer endpoint.
    zmq::message_t address;
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::none);
    metrics_->malformed();
    // libzmq 4.3 reports the listening endpoint here, not the remote address.
    log_("dropped a connection to " + address.to_string() +
         ": ZeroMQ handshake failed (the peer does not speak ZMTP)");
  }
}

void Coordinator::Service::handle(const Peer& peer, const control::Envelope& env) {
  using E = control::Envelope;
  metrics_->message(membership::body_name(env.body_case()));
  switch (env.body_case()) {
    case E::kJoinRequest: return on_join_request(peer, env.join_request());
    case E::kJoinProof: return on_join_proof(peer, env.join_proof());
    case E::kHeartbeat: return on_heartbeat(peer, env.heartbeat());
    case E::kLeave: return on_leave(peer, env.leave());
    case E::kResumeRequest: return on_resume_request(peer, env.resume_request());
    case E::kReady: {
      const auto& r = env.ready();
      if (const auto id = sender(peer, r.member_id(), "ready")) {
        apply(membership_->ready(
            *id, {r.epoch(), r.previous_epoch(), r.committed_seq(), r.held_seq()}, clock_.now()));
      }
      return;
    }
    case E::kBoundaryRequest: {
      const auto& b = env.boundary_request();
      if (const auto id = sender(peer, b.member_id(), "boundary request")) {
        apply(membership_->boundary(*id, b.epoch(), b.leaving(), clock_.now()));
      }
      return;
    }
    case E::kFailureReport: {
      const auto& f = env.failure_report();
      if (const auto id = sender(peer, f.reporter(), "failure report")) {
        log_("member " + std::to_string(*id) + " reports " +
             (f.suspect() ? "member " + std::to_string(f.suspect())
                          : std::string("an unknown peer")) +
             " in epoch " + std::to_string(f.epoch()) + ": " + f.detail());
        apply(membership_->failure_report(*id, f.epoch(), f.suspect(), clock_.now()));
      }
      return;
    }
    case E::kStepTiming: {
      const auto& t = env.step_timing();
      if (const auto id = sender(peer, t.member_id(), "step timing")) {
        apply(membership_->step_timing(*id, t.step(), t.compute_seconds(), clock_.now()));
      }
      return;
    }
    default:
      return drop_malformed(peer, std::string("agent sent coordinator-only message '") +
                                      std::string(membership::body_name(env.body_case())) + "'");
  }
}

std::optional<MemberId> Coordinator::Service::sender(const Peer& peer, MemberId claimed,
                                                     std::string_view what) {
  const auto id = member_of(peer.identity);
  if (!id) return std::nullopt;  // not (any more) a member: its heartbeats tell it so
  if (claimed != *id) {
    drop_malformed(peer, std::string(what) + " for member " + std::to_string(claimed) +
                             " from the connection of member " + std::to_string(*id));
    return std::nullopt;
  }
  return id;
}

void Coordinator::Service::on_resume_request(const Peer& peer,
                                             const control::ResumeRequest& request) {
  using R = control::JoinRejected;
  if (member_of(peer.identity))
    return reject(peer, R::PROTOCOL, "this connection is already a member");
  if (Status st = membership::validate_join_request(request.join()); !st) {
    return reject(peer, R::INVALID_REQUEST, "invalid resume request: " + st.message());
  }
  auto nonce = gate_.challenge(peer.identity, membership::labels_from_request(request.join()),
                               clock_.now(), request.member_id());
  if (!nonce) return reject(peer, R::FULL, "coordinator busy: " + nonce.status().message());
  control::Envelope out;
  out.mutable_challenge()->set_nonce(membership::to_bytes(*nonce));
  send(peer.identity, out);
}

void Coordinator::Service::on_join_request(const Peer& peer, const control::JoinRequest& request) {
  using R = control::JoinRejected;
  if (member_of(peer.identity))
    return reject(peer, R::PROTOCOL, "this connection is already a member");
  if (Status st = membership::validate_join_request(request); !st) {
    return reject(peer, R::INVALID_REQUEST, "invalid join request: " + st.message());
  }
  auto nonce =
      gate_.challenge(peer.identity, membership::labels_from_request(request), clock_.now());
  if (!nonce) return reject(peer, R::FULL, "coordinator busy: " + nonce.status().message());
  control::Envelope out;
  out.mutable_challenge()->set_nonce(membership::to_bytes(*nonce));
  send(peer.identity, out);
}

void Coordinator::Service::on_join_proof(const Peer& peer, const control::JoinProof& proof) {
  using R = control::JoinRejected;
  auto client_nonce = membership::nonce_from_bytes(proof.client_nonce());
  auto mac = membership::mac_from_bytes(proof.mac());
  if (!client_nonce || !mac) {
    return drop_malformed(
        peer, "join proof: " + (!client_nonce ? client_nonce.status() : mac.status()).message());
  }
  std::string who = peer.name();
  if (const auto* labels = gate_.pending_labels(peer.identity)) {
    who += " (name '" + labels->name + "', host '" + labels->host + "')";
  }
  const TimePoint now = clock_.now();
  auto admitted = gate_.verify(peer.identity, *client_nonce, *mac, now);
  if (!admitted) {
    if (admitted.status().code() == StatusCode::kAuthFailed) {
      metrics_->auth_failed();
      log_("rejected join from " + who + ": wrong cluster secret");
      return reject(peer, R::AUTH_FAILED, "wrong cluster secret");
    }
    return reject(peer, R::PROTOCOL, admitted.status().message());
  }
  const bool resuming = admitted->resume_id != 0;
  auto joined = resuming ? membership_->resume(admitted->resume_id, admitted->labels, now)
                         : membership_->join(admitted->labels, now);
  if (!joined) {
    if (resuming)
      return reject(peer, R::UNKNOWN_MEMBER, "cannot resume: " + joined.status().message());
    if (joined.status().code() == StatusCode::kEvicted)
      return reject(peer, R::COOLDOWN, joined.status().message());
    return reject(peer, R::FULL, joined.status().message());
  }
  const MemberId id = joined->id;
  if (resuming) forget_member(id);  // a reconnect: the old connection is dead
  member_of_[peer.identity] = id;
  route_of_[id] = peer.identity;
  const auto& l = admitted->labels;
  if (resuming) {
    log_("member " + std::to_string(id) + " ('" + l.name + "') resumed from " + peer.name());
  } else {
    // Metrics and snapshots first: whoever hears of the join may look at them at once.
    metrics_->joined();
    if (journal_) {
      // The id counter, so that a restart never hands this id out again.
      if (Status st = journal_->append({id, 0, {}}); !st)
        log_("JOURNAL WRITE FAILED: " + st.to_string());
    }
    log_("member " + std::to_string(id) + " joined from " + peer.name() + ": name '" + l.name +
         "', host '" + l.host + "', zone '" + l.zone + "', data " + l.data_address +
         (joined->decisions.new_view || membership_->epoch() == 0
              ? ""
              : " (waits for a step boundary)"));
  }
  publish_snapshot();

  control::Envelope out;
  auto* acc = out.mutable_join_accepted();
  acc->set_member_id(id);
  if (joined->decisions.new_view) {
    journal_view(*joined->decisions.new_view);
    membership::view_to_proto(*joined->decisions.new_view, acc->mutable_view());
  }
  acc->set_heartbeat_interval_ms(static_cast<std::uint32_t>(
      std::max<std::int64_t>(1, duration_cast<milliseconds>(interval()).count())));
  acc->set_coordinator_mac(membership::to_bytes(gate_.coordinator_proof(*admitted, id)));
  acc->set_instance_id(instance_id_);
  send(peer.identity, out);
  apply(joined->decisions, id, /*journaled=*/true);
}

void Coordinator::Service::on_heartbeat(const Peer& peer, const control::Heartbeat& hb) {
  control::Envelope out;
  const auto id = member_of(peer.identity);
  if (!id) {
    out.mutable_evicted()->set_member_id(hb.member_id());
    out.mutable_evicted()->set_reason(
        "not a member of this coordinator (removed earlier, or never joined)");
    out.mutable_evicted()->set_unknown(true);
    out.mutable_evicted()->set_instance_id(instance_id_);
    return send(peer.identity, out);
  }
  if (hb.member_id() != *id) {
    return drop_malformed(peer, "heartbeat for member " + std::to_string(hb.member_id()) +
                                    " from the connection of member " + std::to_string(*id));
  }
  const auto decision = membership_->heartbeat(*id, hb.epoch(), hb.step(), clock_.now());
  out.mutable_heartbeat_ack()->set_epoch(decision.current_epoch);
  out.mutable_heartbeat_ack()->set_joiners_pending(decision.joiners_pending);
  out.mutable_heartbeat_ack()->set_instance_id(instance_id_);
  send(peer.identity, out);
  if (decision.resend_view) {
    // The member missed a push (its pipe was full, or it reconnected): catch it up.
    control::Envelope view;
    membership::view_to_proto(membership_->view(), view.mutable_view());
    send(peer.identity, view);
  }
}

void Coordinator::Service::on_leave(const Peer& peer, const control::Leave& leave) {
  control::Envelope ack;
  ack.mutable_leave_ack()->set_member_id(leave.member_id());
  const auto id = member_of(peer.identity);
  if (!id) return send(peer.identity, ack);  // not a member (any more): leaving is done
  if (leave.member_id() != *id) {
    return drop_malformed(peer, "leave for member " + std::to_string(leave.member_id()) +
                                    " from the connection of member " + std::to_string(*id));
  }
  apply(membership_->leave(*id, clock_.now()));  // sends the LeaveAck
}

void Coordinator::Service::drop_malformed(const Peer& peer, const std::string& why) {
  metrics_->malformed();
  blocked_.insert(peer.identity);
  gate_.forget(peer.identity);
  std::string member;
  if (const auto id = member_of(peer.identity)) member = " (member " + std::to_string(*id) + ")";
  log_("dropped malformed message from " + peer.name() + member + ": " + why);
  if (const auto id = member_of(peer.identity)) {
    apply(membership_->remove(*id, membership::RemovalReason::kMalformed, clock_.now()));
  }
}

void Coordinator::Service::reject(const Peer& peer, control::JoinRejected::Kind kind,
                                  const std::string& reason) {
  if (kind != control::JoinRejected::AUTH_FAILED)
    log_("rejected join from " + peer.name() + ": " + reason);
  control::Envelope out;
  out.mutable_join_rejected()->set_reason(reason);
  out.mutable_join_rejected()->set_kind(kind);
  send(peer.identity, out);
}

void Coordinator::Service::apply(const membership::Decisions& decisions, MemberId skip,
                                 bool journaled) {
  if (decisions.empty()) return;
  publish_snapshot();  // before any message goes out, so a peer that reacts sees it
  for (const auto& line : decisions.log) log_(line);
  for (const auto& removal : decisions.removed) {
    auto route = route_of_.find(removal.id);
    control::Envelope out;
    if (removal.reason == membership::RemovalReason::kLeft) {
      metrics_->left();
      log_("member " + std::to_string(removal.id) + " ('" + removal.name + "') left");
      out.mutable_leave_ack()->set_member_id(removal.id);
    } else {
      metrics_->removed(removal.reason);
      metrics_->evicted(removal.reason, removal.name);
      std::string why(membership::to_string(removal.reason));
      if (removal.reason == membership::RemovalReason::kHeartbeatTimeout) {
        why += " (silent for more than " +
               std::to_string(duration_cast<milliseconds>(config_.heartbeat_timeout).count()) +
               " ms)";
      }
      log_("removed member " + std::to_string(removal.id) + " ('" + removal.name + "'): " + why);
      out.mutable_evicted()->set_member_id(removal.id);
      out.mutable_evicted()->set_reason(why);
      out.mutable_evicted()->set_instance_id(instance_id_);
    }
    if (route != route_of_.end()) send(route->second, out);
    forget_member(removal.id);
  }
  if (decisions.new_view) {
    const membership::View& view = *decisions.new_view;
    if (!journaled) journal_view(view);
    metrics_->view_change(decisions.cause);
    std::string ranks;
    for (const auto& m : view.members)
      ranks += (ranks.empty() ? "" : " ") + std::to_string(m.id) + "@" + m.host;
    log_("view epoch " + std::to_string(view.epoch) + " (" +
         std::string(membership::to_string(decisions.cause)) + "): " + std::to_string(view.size()) +
         " members, ring [" + ranks + "]");
    control::Envelope out;
    membership::view_to_proto(view, out.mutable_view());
    const std::string bytes = membership::encode_envelope(out);  // encode once, send to all
    for (const auto& m : view.members) {
      if (m.id == skip) continue;
      auto route = route_of_.find(m.id);
      TRIB_CHECK(route != route_of_.end()) << "member " << m.id << " in the view has no route";
      router_.send(zmq::buffer(route->second), zmq::send_flags::sndmore);
      (void)router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    }
  }
  if (decisions.go) {
    const auto& g = *decisions.go;
    control::Envelope out;
    auto* go = out.mutable_go();
    go->set_epoch(g.epoch);
    go->set_commit_through(g.commit_through);
    for (auto j : g.joiners) go->add_joiners(j);
    go->set_state_source(g.state_source);
    if (g.recipients.size() > 1 || (g.recipients.size() == 1 && membership_->view().size() == 1)) {
      log_("go epoch " + std::to_string(g.epoch) + ": commit_through " +
           std::to_string(g.commit_through) + ", " + std::to_string(g.joiners.size()) +
           " joiners, state source " + std::to_string(g.state_source));
    }
    const std::string bytes = membership::encode_envelope(out);
    for (MemberId id : g.recipients) {
      auto route = route_of_.find(id);
      if (route == route_of_.end()) continue;
      router_.send(zmq::buffer(route->second), zmq::send_flags::sndmore);
      (void)router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    }
  }
}

void Coordinator::Service::send(const std::string& identity, const control::Envelope& env) {
  const std::string bytes = membership::encode_envelope(env);
  // ROUTER drops what it cannot route or queue instead of blocking; never wait on a peer.
  router_.send(zmq::buffer(identity), zmq::send_flags::sndmore);
  (void)router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
}

void Coordinator::Service::forget_member(MemberId id) {
  auto route = route_of_.find(id);
  if (route == route_of_.end()) return;
  member_of_.erase(route->second);
  route_of_.erase(route);
}

void Coordinator::Service::publish_snapshot() {
  metrics_->set_membership(membership_->size(), membership_->epoch());
  std::size_t pending = 0;
  for (const auto& [id, p] : membership_->peers())
    pending += p.phase == membership::PeerPhase::kPending;
  metrics_->set_joiners_pending(pending);
  std::lock_guard lock(snapshot_mu_);
  view_snapshot_ = membership_->view();
  member_count_ = membership_->size();
}

Coordinator::Coordinator(CoordinatorConfig config, membership::LogSink log, const Clock& clock)
    : service_(std::make_unique<Service>(std::move(config), std::move(log), clock)) {}

Coordinator::~Coordinator() { stop(); }

Status Coordinator::bind() { return service_->bind(); }

void Coordinator::run_until(const std::atomic<bool>& stop) { service_->run_until(stop); }

Status Coordinator::start() {
  if (thread_.joinable()) return error(StatusCode::kInvalidArgument, "coordinator already started");
  if (!service_->bound()) TRIB_RETURN_IF_ERROR(service_->bind());
  stop_.store(false);
  thread_ = std::thread([this] { service_->run_until(stop_); });
  return Status::ok();
}

void Coordinator::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::string Coordinator::endpoint() const { return service_->endpoint(); }
int Coordinator::metrics_port() const { return service_->metrics_port(); }
membership::View Coordinator::current_view() const { return service_->current_view(); }
std::size_t Coordinator::member_count() const { return service_->member_count(); }
std::uint64_t Coordinator::instance_id() const { return service_->instance_id(); }

}  // namespace tributary::coordinator
