#include "coordinator/coordinator.h"

#include <zmq.h>

#include <algorithm>

#include <prometheus/text_serializer.h>

#include "coordinator/service.h"
#include "core/check.h"

namespace tributary::coordinator {
namespace {

using membership::MemberId;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr milliseconds kMaxPollWait{50};
constexpr std::size_t kMaxBlocked = 4096;
constexpr std::size_t kMaxMessagesPerWake = 256;  // then run ticks, so a flood cannot starve expiry

// ZeroMQ wants '*' for "any port"; accept the conventional 0 as well.
std::string zmq_bind_address(const std::string& address) {
  if (address.size() > 2 && address.ends_with(":0"))
    return address.substr(0, address.size() - 1) + "*";
  return address;
}

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
  if (c.handshake_timeout < milliseconds(1)) return bad("handshake_timeout must be >= 1 ms");
  if (c.max_pending_joins_per_source < 1) return bad("max_pending_joins_per_source must be >= 1");
  if (c.max_message_bytes < 1024) return bad("max_message_bytes below 1024");
  if (c.max_pending_joins < 1) return bad("max_pending_joins must be >= 1");
  if (c.confirm_silence < Duration::zero()) return bad("confirm_silence must be >= 0");
  if (!(c.max_heartbeat_rate >= 0)) return bad("max_heartbeat_rate must be >= 0");
  if (c.ready_timeout <= Duration::zero()) return bad("ready_timeout must be positive");
  if (c.boundary_timeout <= Duration::zero()) return bad("boundary_timeout must be positive");
  if (c.resume_timeout <= Duration::zero()) return bad("resume_timeout must be positive");
  if (Status st = membership::validate(c.straggler); !st) return bad(st.message());
  if (!c.etcd_endpoints.empty() && !c.journal_path.empty())
    return bad("a journal and etcd exclude each other (etcd holds the state)");
  if (!c.etcd_endpoints.empty() && (c.lease_ttl < std::chrono::seconds(1) ||
                                    c.lease_ttl % std::chrono::seconds(1) != Duration::zero())) {
    return bad("lease_ttl must be a whole number of seconds, at least 1");
  }
  return Status::ok();
}

Coordinator::Service::Service(CoordinatorConfig config, Logger log, const Clock& clock)
    : config_(std::move(config)),
      log_(std::move(log)),
      clock_(clock),
      gate_(config_.secret, config_.join_timeout, config_.max_pending_joins,
            config_.max_pending_joins_per_source),
      status_gate_(config_.secret, config_.join_timeout, config_.max_pending_joins),
      blocked_(kMaxBlocked) {
  const Nonce r = random_nonce();
  for (int i = 0; i < 8; ++i) instance_id_ = (instance_id_ << 8) | r[static_cast<std::size_t>(i)];
  if (instance_id_ == 0) instance_id_ = 1;
}

Status Coordinator::Service::bind() {
  if (bound())
    return error(StatusCode::kInvalidArgument, "coordinator already bound to " + endpoint());
  TRIB_RETURN_IF_ERROR(validate(config_));
  started_at_ = clock_.now();
  std::string bound;
  try {
    secure_router();
    router_.set(zmq::sockopt::linger, 0);
    // libzmq itself drops a connection that sends a larger frame, before we see it.
    router_.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(config_.max_message_bytes));
    router_.bind(zmq_bind_address(config_.bind_address));
    bound = router_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    router_ = zmq::socket_t();
    monitor_ = zmq::socket_t();
    zap_ = zmq::socket_t();
    return error(StatusCode::kUnavailable,
                 "cannot bind coordinator to " + config_.bind_address + ": " + e.what());
  }
  if (Status st = open_store(bound); !st) {
    router_ = zmq::socket_t();
    return st;
  }
  int port = 0;
  if (!config_.metrics_address.empty()) {
    auto server = MetricsServer::start(
        config_.metrics_address,
        [registry = registry_] {
          return prometheus::TextSerializer().Serialize(registry->Collect());
        },
        log_.child("coordinator-metrics"));
    if (!server) {
      router_ = zmq::socket_t();
      return server.status();
    }
    metrics_server_ = std::move(server).value();
    port = metrics_server_->port();
  }
  {
    std::lock_guard lock(snapshot_mu_);
    endpoint_ = bound;
    metrics_port_ = port;
  }
  publish_snapshot();
  log_.info("listening on " + bound +
            (port ? ", metrics on port " + std::to_string(port) : std::string()) +
            ", initial world size " + std::to_string(config_.initial_world_size) +
            ", heartbeat timeout " +
            std::to_string(duration_cast<milliseconds>(config_.heartbeat_timeout).count()) +
            " ms, instance " + std::to_string(instance_id_));
  return Status::ok();
}

// Written and fsync'ed (or compare-and-swapped into etcd) before the view reaches anyone:
// a restarted coordinator never reissues an epoch somebody saw.
bool Coordinator::Service::journal_view(const membership::View& view,
                                        const membership::ViewChange& change) {
  if (!store_) return true;
  membership::JournalEntry entry;
  entry.epoch = view.epoch;
  entry.cause = change.cause;
  entry.unix_ms = change.unix_ms;
  for (const auto& r : change.removed)
    entry.removed.push_back({r.id, r.name, r.reason, r.noticed_by});
  entry.last_member_id = membership_->last_member_id();
  for (const auto& m : view.members) {
    const auto* p = membership_->find(m.id);
    membership::MemberLabels labels =
        p ? p->labels
          : membership::MemberLabels{"", m.host, m.zone, m.data_address, m.capabilities};
    entry.members.push_back({m.id, std::move(labels)});
  }
  entry.with_state = membership_->with_state(view);
  return recorded(store_->record(entry), "this view");
}

void Coordinator::Service::run_until(const std::atomic<bool>& stop) {
  TRIB_CHECK(bound()) << "run_until() before a successful bind()";
  while (!stop.load()) {
    try {
      if (!leading_) {
        stand_by();
        continue;
      }
      const TimePoint now = clock_.now();
      const TimePoint next = std::min(membership_->next_expiry(), rounds_.next_deadline());
      const Duration wait =
          next <= now ? Duration::zero() : std::min<Duration>(next - now, kMaxPollWait);
      zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0},
                                 {zap_.handle(), 0, ZMQ_POLLIN, 0}};
      // Round up so a sub-millisecond wait does not spin.
      zmq::poll(items, 3, duration_cast<milliseconds>(wait + milliseconds(1) - Duration{1}));
      // A leader paused past its lease learns here, before it answers anyone.
      if (!still_leading()) continue;
      if (items[2].revents & ZMQ_POLLIN) drain_zap();
      if (items[1].revents & ZMQ_POLLIN) drain_monitor();
      if (items[0].revents & ZMQ_POLLIN) drain_router();
      if (!leading_) continue;  // a record failed its compare-and-swap: stood down
      tick();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR)
        log_.error(std::string("zeromq error in the coordinator loop: ") + e.what());
    }
  }
}

void Coordinator::Service::tick() {
  const TimePoint now = clock_.now();
  gate_.expire(now);
  refusals_.flush(log_, LogLevel::kWarn, now);
  apply(membership_->tick(now));
  apply_rounds(rounds_.tick(membership_->view(), now));
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
      peer.fd = zmq_msg_get(payload.handle(), ZMQ_SRCFD);
    }
    if (blocked_.contains(peer.identity)) continue;
    if (frames != 2) {
      drop_malformed(peer, "message of " + std::to_string(frames - 1) + " frames, expected 1");
      continue;
    }
    auto decoded = control::decode_envelope(payload.to_string_view(), config_.max_message_bytes);
    if (!decoded) {
      drop_malformed(peer, decoded.status().message());
      continue;
    }
    handle(peer, *decoded);
  }
}

void Coordinator::Service::publish_snapshot() {
  metrics_->set_leading(leading_);
  if (!membership_) {  // standing by
    metrics_->set_membership(0, 0);
    std::lock_guard lock(snapshot_mu_);
    view_snapshot_ = {};
    member_count_ = 0;
    leading_snapshot_ = false;
    return;
  }
  metrics_->set_membership(membership_->size(), membership_->epoch());
  std::size_t pending = 0;
  for (const auto& [id, p] : membership_->peers())
    pending += p.phase == membership::PeerPhase::kPending;
  metrics_->set_joiners_pending(pending);
  log_.context()->set_epoch(membership_->epoch());
  std::lock_guard lock(snapshot_mu_);
  view_snapshot_ = membership_->view();
  member_count_ = membership_->size();
  leading_snapshot_ = leading_;
}

Coordinator::Coordinator(CoordinatorConfig config, Logger log, const Clock& clock)
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
bool Coordinator::leading() const { return service_->leading(); }
std::uint64_t Coordinator::instance_id() const { return service_->instance_id(); }

}  // namespace tributary::coordinator
