#include "membership/coordinator_client.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "core/check.h"
#include "membership/control_codec.h"
#include "membership/join_auth.h"

namespace tributary::membership {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

long poll_timeout_ms(TimePoint now, TimePoint until) {
  if (until <= now) return 0;
  // Round up: a 0 ms poll for a deadline 0.4 ms away would spin.
  const auto ms = duration_cast<milliseconds>(until - now + milliseconds(1) - Duration{1}).count();
  return static_cast<long>(std::min<std::int64_t>(ms, 1000));
}

std::string default_name(const std::string& host) {
  return host + "/" + program_invocation_short_name + ":" + std::to_string(::getpid());
}

bool send_envelope(zmq::socket_t& socket, const control::Envelope& envelope) {
  const std::string bytes = encode_envelope(envelope);
  // Non-blocking: when the coordinator is gone the pipe fills and we drop, rather than
  // block the heartbeat thread.
  return socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
}

// Deadline::max() means "no deadline"; keep it away from wait_until's arithmetic.
template <typename Predicate>
bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Deadline deadline,
                Predicate done) {
  if (deadline.at == TimePoint::max()) {
    cv.wait(lock, done);
    return true;
  }
  return cv.wait_until(lock, deadline.at, done);
}

}  // namespace

struct CoordinatorClient::Impl {
  LogSink log;
  prometheus::Gauge* size_gauge = nullptr;
  prometheus::Gauge* epoch_gauge = nullptr;

  zmq::context_t context{1};
  zmq::socket_t dealer;
  zmq::socket_t wake_rx;  // owned by the worker thread
  zmq::socket_t wake_tx;  // any API thread, under wake_mu
  std::mutex wake_mu;
  std::thread worker;
  std::string endpoint;

  mutable std::mutex mu;
  std::condition_variable cv;
  MemberId id = 0;
  View view;
  Duration interval{std::chrono::seconds(1)};
  TimePoint last_ack{};
  bool evicted = false;
  std::string evicted_reason;
  bool leaving = false;
  bool left = false;
  std::atomic<std::uint64_t> step{0};
  std::atomic<bool> joiners_pending{false};
  // Ready/Go: the Ready being waited on (resent each interval until its Go arrives).
  std::optional<ViewReady> pending_ready;
  std::optional<Go> last_go;
  // The boundary request of the current epoch (resent each interval until a newer view
  // arrives: one lost around a coordinator restart must not stall the step boundary).
  struct PendingBoundary {
    Epoch epoch = 0;
    bool leaving = false;
  };
  std::optional<PendingBoundary> pending_boundary;
  // Fire-and-forget messages from API threads; the worker thread sends them.
  std::vector<control::Envelope> outbox;

  // Worker-thread state (no lock needed): what a resume after a coordinator restart needs.
  ClientConfig config;
  std::string name;
  std::uint64_t instance_id = 0;  // the coordinator instance we are a member of
  struct Resume {
    TimePoint started{};
    std::optional<Nonce> server_nonce;
    Nonce client_nonce{};
  };
  std::optional<Resume> resume;

  ~Impl() {
    if (worker.joinable()) {
      wake('q');
      worker.join();
    }
  }

  void wake(char command) {
    std::lock_guard lock(wake_mu);
    wake_tx.send(zmq::buffer(&command, 1), zmq::send_flags::none);
  }

  Result<Joined> handshake(const ClientConfig& config, Deadline deadline);
  void run();
  void handle(const control::Envelope& envelope, TimePoint now);
  void publish_view(View v);
  // Queues a message for the worker thread and wakes it.
  void post(control::Envelope envelope);
  void start_resume(TimePoint now, std::string_view why);
  void handle_resume(const control::Envelope& envelope, TimePoint now);
  void mark_evicted(const std::string& reason);
  control::JoinRequest join_request() const;
};

control::JoinRequest CoordinatorClient::Impl::join_request() const {
  control::JoinRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_name(name);
  request.set_host(config.host);
  request.set_zone(config.zone);
  request.set_data_address(config.data_address);
  for (const auto& c : config.capabilities) request.add_capabilities(c);
  request.set_pid(static_cast<std::uint32_t>(::getpid()));
  request.set_process_name(program_invocation_short_name);
  return request;
}

void CoordinatorClient::Impl::post(control::Envelope envelope) {
  {
    std::lock_guard lock(mu);
    if (id == 0 || evicted || left) return;
    outbox.push_back(std::move(envelope));
  }
  wake('s');
}

void CoordinatorClient::Impl::mark_evicted(const std::string& reason) {
  {
    std::lock_guard lock(mu);
    if (left || evicted) return;
    evicted = true;
    evicted_reason = reason;
  }
  log("coordinator " + endpoint + " removed member " + std::to_string(id) + ": " + reason);
  cv.notify_all();
}

// The coordinator does not know us although we are a member: it restarted (its journal
// lists us) or lost us. Re-authenticate with our member id; heartbeats pause meanwhile.
void CoordinatorClient::Impl::start_resume(TimePoint now, std::string_view why) {
  if (resume && now - resume->started < 2 * interval + std::chrono::milliseconds(500))
    return;  // in progress
  resume = Resume{now, std::nullopt, random_nonce()};
  log("resuming member " + std::to_string(id) + " with coordinator " + endpoint + ": " +
      std::string(why));
  control::Envelope env;
  *env.mutable_resume_request()->mutable_join() = join_request();
  env.mutable_resume_request()->set_member_id(id);
  send_envelope(dealer, env);
}

void CoordinatorClient::Impl::handle_resume(const control::Envelope& env, TimePoint now) {
  switch (env.body_case()) {
    case control::Envelope::kChallenge: {
      auto nonce = nonce_from_bytes(env.challenge().nonce());
      if (!nonce)
        return log("ignored bad challenge from coordinator " + endpoint + ": " +
                   nonce.status().message());
      resume->server_nonce = *nonce;
      control::Envelope proof;
      proof.mutable_join_proof()->set_client_nonce(to_bytes(resume->client_nonce));
      proof.mutable_join_proof()->set_mac(
          to_bytes(resume_proof_mac(config.secret, *nonce, resume->client_nonce, id, name)));
      send_envelope(dealer, proof);
      return;
    }
    case control::Envelope::kJoinAccepted: {
      const auto& acc = env.join_accepted();
      auto their_mac = mac_from_bytes(acc.coordinator_mac());
      if (!resume->server_nonce || acc.member_id() != id || !their_mac ||
          !macs_equal(*their_mac, coordinator_proof_mac(config.secret, *resume->server_nonce,
                                                        resume->client_nonce, id))) {
        return mark_evicted("coordinator " + endpoint +
                            " answered our resume without proving the cluster secret");
      }
      instance_id = acc.instance_id();
      resume.reset();
      {
        std::lock_guard lock(mu);
        last_ack = now;
      }
      log("resumed member " + std::to_string(id) + " with coordinator " + endpoint + " (instance " +
          std::to_string(instance_id) + ")");
      return;
    }
    case control::Envelope::kJoinRejected:
      resume.reset();
      return mark_evicted("coordinator " + endpoint +
                          " refused our resume: " + env.join_rejected().reason());
    default: return;
  }
}

CoordinatorClient::CoordinatorClient(LogSink log, prometheus::Registry* metrics)
    : impl_(std::make_unique<Impl>()) {
  impl_->log = log ? std::move(log) : [](std::string_view) {};
  if (metrics != nullptr) {
    impl_->size_gauge = &prometheus::BuildGauge()
                             .Name("tributary_membership_size")
                             .Help("Members in the view this agent holds")
                             .Register(*metrics)
                             .Add({});
    impl_->epoch_gauge = &prometheus::BuildGauge()
                              .Name("tributary_epoch")
                              .Help("Epoch of the view this agent holds")
                              .Register(*metrics)
                              .Add({});
  }
}

CoordinatorClient::~CoordinatorClient() = default;

Result<Joined> CoordinatorClient::join(const ClientConfig& config, Deadline deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->id != 0 || impl_->worker.joinable()) {
      return error(StatusCode::kInvalidArgument, "join() called twice on one CoordinatorClient");
    }
  }
  try {
    return impl_->handshake(config, deadline);
  } catch (const zmq::error_t& e) {
    // Only setup calls throw (a malformed endpoint, no file descriptors).
    return error(StatusCode::kInvalidArgument,
                 "coordinator endpoint '" + config.endpoint + "': " + e.what());
  }
}

Result<Joined> CoordinatorClient::Impl::handshake(const ClientConfig& config, Deadline deadline) {
  endpoint = config.endpoint;
  if (config.secret.empty()) return error(StatusCode::kInvalidArgument, "empty cluster secret");
  this->config = config;
  name = config.name.empty() ? default_name(config.host) : config.name;
  control::Envelope request_env;
  *request_env.mutable_join_request() = join_request();
  const control::JoinRequest& request = request_env.join_request();
  if (Status st = validate_join_request(request); !st)
    return error(StatusCode::kInvalidArgument, "join request: " + st.message());

  dealer = zmq::socket_t(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(kMaxControlMessageBytes));
  dealer.connect(config.endpoint);
  send_envelope(dealer, request_env);

  std::optional<Nonce> server_nonce;
  Nonce client_nonce{};
  bool heard_back = false;
  for (;;) {
    const TimePoint now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) break;
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(poll_timeout_ms(now, deadline.at)));
    if ((item.revents & ZMQ_POLLIN) == 0) continue;
    zmq::message_t msg;
    if (!dealer.recv(msg, zmq::recv_flags::dontwait)) continue;
    heard_back = true;
    auto decoded = decode_envelope(msg.to_string_view());
    if (!decoded) {
      log("ignored malformed message from coordinator " + endpoint + ": " +
          decoded.status().message());
      continue;
    }
    const control::Envelope& env = *decoded;
    switch (env.body_case()) {
      case control::Envelope::kChallenge: {
        auto nonce = nonce_from_bytes(env.challenge().nonce());
        if (!nonce)
          return error(
              StatusCode::kBadFrame,
              "coordinator " + endpoint + " sent a bad challenge: " + nonce.status().message());
        server_nonce = *nonce;
        client_nonce = random_nonce();
        control::Envelope proof;
        proof.mutable_join_proof()->set_client_nonce(to_bytes(client_nonce));
        proof.mutable_join_proof()->set_mac(
            to_bytes(join_proof_mac(config.secret, *server_nonce, client_nonce, name)));
        send_envelope(dealer, proof);
        break;
      }
      case control::Envelope::kJoinRejected: {
        const auto& rej = env.join_rejected();
        const std::string what = "coordinator " + endpoint + " rejected the join: " + rej.reason();
        log(what);
        switch (rej.kind()) {
          case control::JoinRejected::AUTH_FAILED: return error(StatusCode::kAuthFailed, what);
          case control::JoinRejected::INVALID_REQUEST:
            return error(StatusCode::kInvalidArgument, what);
          // COOLDOWN (evicted as a straggler lately), FULL, ...: retry later.
          default: return error(StatusCode::kUnavailable, what);
        }
      }
      case control::Envelope::kJoinAccepted: {
        const auto& acc = env.join_accepted();
        if (!server_nonce)
          return error(StatusCode::kBadFrame,
                       "coordinator " + endpoint + " accepted a join it never challenged");
        auto their_mac = mac_from_bytes(acc.coordinator_mac());
        if (!their_mac ||
            !macs_equal(*their_mac, coordinator_proof_mac(config.secret, *server_nonce,
                                                          client_nonce, acc.member_id()))) {
          const std::string what = "coordinator " + endpoint +
                                   " could not prove the cluster secret (its secret differs from "
                                   "ours, or it is not our coordinator)";
          log(what);
          return error(StatusCode::kAuthFailed, what);
        }
        View admitted;
        if (acc.has_view() && acc.view().epoch() > 0) {
          auto v = view_from_proto(acc.view());
          if (!v)
            return error(StatusCode::kBadFrame,
                         "coordinator " + endpoint + " sent a bad view: " + v.status().message());
          if (!v->contains(acc.member_id()))
            return error(StatusCode::kBadFrame,
                         "coordinator " + endpoint + " admitted us in a view without us");
          admitted = std::move(v).value();
        }
        {
          std::lock_guard lock(mu);
          id = acc.member_id();
          instance_id = acc.instance_id();
          if (config.heartbeat_interval > Duration::zero()) {
            interval = config.heartbeat_interval;
          } else if (acc.heartbeat_interval_ms() > 0) {
            interval = milliseconds(acc.heartbeat_interval_ms());
          }
          last_ack = now;
        }
        publish_view(admitted);
        log("joined coordinator " + endpoint + " as member " + std::to_string(acc.member_id()) +
            " (" + name + ")");
        // The worker thread takes the sockets over; starting it is the memory barrier.
        const std::string wake_endpoint = "inproc://tributary-client-wake";
        wake_rx = zmq::socket_t(context, zmq::socket_type::pair);
        wake_rx.bind(wake_endpoint);
        wake_tx = zmq::socket_t(context, zmq::socket_type::pair);
        wake_tx.connect(wake_endpoint);
        worker = std::thread([this] { run(); });
        return Joined{acc.member_id(), admitted};
      }
      default:
        log(std::string("ignored unexpected ") + std::string(body_name(env.body_case())) +
            " during join from " + endpoint);
        break;
    }
  }
  if (!heard_back) {
    return error(StatusCode::kUnavailable,
                 "no answer from coordinator " + endpoint +
                     " by the deadline (unreachable, or not a Tributary coordinator)");
  }
  return error(StatusCode::kTimedOut,
               "join handshake with coordinator " + endpoint + " did not finish by the deadline");
}

void CoordinatorClient::Impl::publish_view(View v) {
  {
    std::lock_guard lock(mu);
    if (v.epoch <= view.epoch) return;  // stale or duplicate push
    view = std::move(v);
    if (size_gauge != nullptr) size_gauge->Set(static_cast<double>(view.size()));
    if (epoch_gauge != nullptr) epoch_gauge->Set(static_cast<double>(view.epoch));
  }
  cv.notify_all();
}

void CoordinatorClient::Impl::run() {
  TimePoint next_heartbeat = std::chrono::steady_clock::now();
  for (;;) {
    TimePoint now = std::chrono::steady_clock::now();
    // While resuming, the coordinator does not know us yet: queued messages wait for the
    // resume to finish instead of being dropped.
    auto flush_outbox = [&] {
      if (resume) return;
      std::vector<control::Envelope> out;
      {
        std::lock_guard lock(mu);
        out.swap(outbox);
      }
      for (const auto& e : out) send_envelope(dealer, e);
    };
    zmq::pollitem_t items[] = {{wake_rx.handle(), 0, ZMQ_POLLIN, 0},
                               {dealer.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, milliseconds(poll_timeout_ms(now, next_heartbeat)));
    now = std::chrono::steady_clock::now();
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t cmd;
      while (wake_rx.recv(cmd, zmq::recv_flags::dontwait)) {
        if (cmd.to_string_view() == "q") return;
        if (cmd.to_string_view() == "l") next_heartbeat = now;  // send the Leave right away, below
        if (cmd.to_string_view() == "r") next_heartbeat = now;  // send a new Ready right away
      }
      flush_outbox();
    }
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t msg;
      while (dealer.recv(msg, zmq::recv_flags::dontwait)) {
        auto decoded = decode_envelope(msg.to_string_view());
        if (!decoded) {
          log("ignored malformed message from coordinator " + endpoint + ": " +
              decoded.status().message());
          continue;
        }
        handle(*decoded, now);
      }
    }
    if (now < next_heartbeat) continue;
    flush_outbox();
    Duration wait;
    control::Envelope out;
    std::optional<control::Envelope> ready_env;
    std::optional<control::Envelope> boundary_env;
    {
      std::lock_guard lock(mu);
      wait = interval;
      if (evicted || left) {
        next_heartbeat = TimePoint::max();
        continue;
      }
      // While leaving, repeat the Leave each interval until it is acknowledged.
      if (leaving) {
        out.mutable_leave()->set_member_id(id);
      } else {
        auto* hb = out.mutable_heartbeat();
        hb->set_member_id(id);
        hb->set_epoch(view.epoch);
        hb->set_step(step.load());
      }
      // Ready is repeated until its Go arrives: a lost one (a coordinator restart, a full
      // pipe) must not stall the view change.
      if (pending_ready && !(last_go && last_go->epoch >= pending_ready->epoch) &&
          pending_ready->epoch >= view.epoch) {
        ready_env.emplace();
        auto* r = ready_env->mutable_ready();
        r->set_member_id(id);
        r->set_epoch(pending_ready->epoch);
        r->set_previous_epoch(pending_ready->previous_epoch);
        r->set_committed_seq(pending_ready->committed_seq);
        r->set_held_seq(pending_ready->held_seq);
      }
      if (pending_boundary && pending_boundary->epoch >= view.epoch) {
        boundary_env.emplace();
        auto* b = boundary_env->mutable_boundary_request();
        b->set_member_id(id);
        b->set_epoch(pending_boundary->epoch);
        b->set_leaving(pending_boundary->leaving);
      }
    }
    if (resume && !out.has_leave()) {
      // Restart a resume that got no answer (the coordinator may still be starting).
      start_resume(now, "previous resume attempt unanswered");
    } else {
      send_envelope(dealer, out);
      if (ready_env) send_envelope(dealer, *ready_env);
      if (boundary_env) send_envelope(dealer, *boundary_env);
    }
    next_heartbeat = now + wait;
  }
}

void CoordinatorClient::Impl::handle(const control::Envelope& env, TimePoint now) {
  if (resume) {
    switch (env.body_case()) {
      case control::Envelope::kChallenge:
      case control::Envelope::kJoinAccepted:
      case control::Envelope::kJoinRejected: return handle_resume(env, now);
      case control::Envelope::kEvicted:
      case control::Envelope::kHeartbeatAck:
        return;  // answers to what we sent before the restart was noticed
      default: break;
    }
  }
  switch (env.body_case()) {
    case control::Envelope::kView: {
      auto v = view_from_proto(env.view());
      if (!v) {
        log("ignored bad view from coordinator " + endpoint + ": " + v.status().message());
        return;
      }
      if (!v->contains(id)) {
        log("ignored view epoch " + std::to_string(v->epoch) + " that does not include member " +
            std::to_string(id));
        return;
      }
      publish_view(std::move(v).value());
      return;
    }
    case control::Envelope::kHeartbeatAck: {
      const auto& ack = env.heartbeat_ack();
      if (ack.instance_id() != 0 && instance_id != 0 && ack.instance_id() != instance_id) {
        return start_resume(now, "coordinator instance changed");
      }
      joiners_pending.store(ack.joiners_pending());
      std::lock_guard lock(mu);
      last_ack = now;
      return;
    }
    case control::Envelope::kEvicted: {
      const auto& ev = env.evicted();
      // "Unknown connection": the coordinator restarted (another instance id) or our
      // connection was re-established (ZeroMQ gives it a new routing id). Resume: a
      // coordinator that removed us refuses it, and then we are evicted.
      if (ev.unknown()) {
        {
          std::lock_guard lock(mu);
          if (left || evicted || leaving) return;
        }
        return start_resume(
            now,
            ev.instance_id() != instance_id
                ? "coordinator restarted (new instance " + std::to_string(ev.instance_id()) + ")"
                : std::string("the coordinator no longer knows this connection"));
      }
      return mark_evicted(ev.reason());
    }
    case control::Envelope::kGo: {
      const auto& g = env.go();
      Go go;
      go.epoch = g.epoch();
      go.commit_through = g.commit_through();
      go.joiners.assign(g.joiners().begin(), g.joiners().end());
      go.state_source = g.state_source();
      {
        std::lock_guard lock(mu);
        if (last_go && last_go->epoch >= go.epoch) return;  // a resend
        last_go = std::move(go);
      }
      cv.notify_all();
      return;
    }
    case control::Envelope::kLeaveAck: {
      {
        std::lock_guard lock(mu);
        left = true;
      }
      cv.notify_all();
      return;
    }
    default:
      log(std::string("ignored unexpected ") + std::string(body_name(env.body_case())) +
          " from coordinator " + endpoint);
      return;
  }
}

Result<View> CoordinatorClient::wait_for_view(Epoch min_epoch, Deadline deadline) {
  std::unique_lock lock(impl_->mu);
  if (impl_->id == 0) return error(StatusCode::kInvalidArgument, "wait_for_view() before join()");
  auto done = [&] { return impl_->view.epoch >= min_epoch || impl_->evicted || impl_->left; };
  if (!wait_until(impl_->cv, lock, deadline, done)) {
    return error(StatusCode::kTimedOut, "no view with epoch >= " + std::to_string(min_epoch) +
                                            " by the deadline (holding epoch " +
                                            std::to_string(impl_->view.epoch) + ")");
  }
  if (impl_->evicted)
    return error(StatusCode::kEvicted, "removed by the coordinator: " + impl_->evicted_reason);
  if (impl_->left) return error(StatusCode::kAborted, "this member left");
  return impl_->view;
}

View CoordinatorClient::view() const {
  std::lock_guard lock(impl_->mu);
  return impl_->view;
}

MemberId CoordinatorClient::member_id() const {
  std::lock_guard lock(impl_->mu);
  return impl_->id;
}

void CoordinatorClient::set_step(std::uint64_t step) { impl_->step.store(step); }

Status CoordinatorClient::health() const {
  std::lock_guard lock(impl_->mu);
  if (impl_->id == 0) return error(StatusCode::kUnavailable, "not joined");
  if (impl_->evicted)
    return error(StatusCode::kEvicted, "removed by the coordinator: " + impl_->evicted_reason);
  if (impl_->left) return error(StatusCode::kAborted, "this member left");
  const auto silent = std::chrono::steady_clock::now() - impl_->last_ack;
  if (silent > 5 * impl_->interval) {
    return error(StatusCode::kUnavailable,
                 "coordinator " + impl_->endpoint + " acknowledged no heartbeat for " +
                     std::to_string(duration_cast<milliseconds>(silent).count()) + " ms");
  }
  return Status::ok();
}

Status CoordinatorClient::leave(Deadline deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->id == 0) return error(StatusCode::kInvalidArgument, "leave() before join()");
    if (impl_->evicted || impl_->left) return Status::ok();
    impl_->leaving = true;
  }
  impl_->wake('l');
  std::unique_lock lock(impl_->mu);
  auto done = [&] { return impl_->left || impl_->evicted; };
  if (!wait_until(impl_->cv, lock, deadline, done)) {
    return error(StatusCode::kTimedOut, "coordinator " + impl_->endpoint +
                                            " did not acknowledge the leave by the deadline");
  }
  return Status::ok();
}

}  // namespace tributary::membership

namespace tributary::membership {

Result<Go> CoordinatorClient::ready(const ViewReady& r, Deadline deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->id == 0) return error(StatusCode::kInvalidArgument, "ready() before join()");
    if (r.epoch == 0) return error(StatusCode::kInvalidArgument, "ready() for epoch 0");
    impl_->pending_ready = r;
  }
  impl_->wake('r');
  std::unique_lock lock(impl_->mu);
  auto& im = *impl_;
  auto done = [&] {
    return (im.last_go && im.last_go->epoch >= r.epoch) || im.view.epoch > r.epoch || im.evicted ||
           im.left;
  };
  if (!wait_until(im.cv, lock, deadline, done)) {
    return error(StatusCode::kTimedOut,
                 "no Go for epoch " + std::to_string(r.epoch) + " by the deadline");
  }
  if (im.evicted)
    return error(StatusCode::kEvicted, "removed by the coordinator: " + im.evicted_reason);
  if (im.left) return error(StatusCode::kAborted, "this member left");
  if (im.last_go && im.last_go->epoch == r.epoch) return *im.last_go;
  return error(StatusCode::kAborted,
               "epoch " + std::to_string(r.epoch) + " was superseded by epoch " +
                   std::to_string(std::max(im.view.epoch, im.last_go ? im.last_go->epoch : 0)) +
                   " before its Go");
}

void CoordinatorClient::report_failure(Epoch epoch, MemberId suspect, const std::string& detail) {
  control::Envelope env;
  auto* f = env.mutable_failure_report();
  f->set_reporter(member_id());
  f->set_suspect(suspect);
  f->set_epoch(epoch);
  f->set_detail(detail.substr(0, kMaxDetailBytes));
  if (epoch == 0) return;  // nothing to report about "no view"
  impl_->post(std::move(env));
}

void CoordinatorClient::report_step(std::uint64_t step, double compute_seconds) {
  if (!(compute_seconds >= 0.0)) compute_seconds = 0.0;
  compute_seconds = std::min(compute_seconds, kMaxComputeSeconds);
  control::Envelope env;
  auto* t = env.mutable_step_timing();
  t->set_member_id(member_id());
  t->set_epoch(view().epoch);
  t->set_step(step);
  t->set_compute_seconds(compute_seconds);
  t->set_arrival_unix_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
  impl_->post(std::move(env));
}

bool CoordinatorClient::joiners_pending() const { return impl_->joiners_pending.load(); }

void CoordinatorClient::request_boundary(Epoch epoch, bool leaving) {
  if (epoch == 0) return;
  control::Envelope env;
  auto* b = env.mutable_boundary_request();
  b->set_member_id(member_id());
  b->set_epoch(epoch);
  b->set_leaving(leaving);
  {
    std::lock_guard lock(impl_->mu);
    impl_->pending_boundary = Impl::PendingBoundary{epoch, leaving};
  }
  impl_->post(std::move(env));
}

bool CoordinatorClient::left() const {
  std::lock_guard lock(impl_->mu);
  return impl_->left;
}

}  // namespace tributary::membership
