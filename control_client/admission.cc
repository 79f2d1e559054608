// Admission: the join on the caller's thread, and the resume that the client's thread runs
// when the coordinator restarted. Both speak the one challenge-response of handshake.h.
#include <unistd.h>

#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "control/curve_keys.h"
#include "control_client/client_impl.h"
#include "control_client/curve_dealer.h"

namespace tributary::control_client {
namespace {

using std::chrono::milliseconds;

// With several coordinators, how long one join attempt may take before the next is tried.
constexpr milliseconds kJoinAttemptSlice{1000};

std::string default_name(const std::string& host) {
  return host + "/" + program_invocation_short_name + ":" + std::to_string(::getpid());
}

}  // namespace

control::JoinRequest CoordinatorClient::Impl::join_request() const {
  control::JoinRequest request;
  request.set_protocol_version(control::kProtocolVersion);
  request.set_name(name);
  request.set_host(config.host);
  request.set_zone(config.zone);
  request.set_data_address(config.data_address);
  for (const auto& c : config.capabilities) request.add_capabilities(c);
  request.set_pid(static_cast<std::uint32_t>(::getpid()));
  request.set_process_name(program_invocation_short_name);
  return request;
}

Result<Joined> CoordinatorClient::Impl::join(const ClientConfig& config, Deadline deadline) {
  endpoints = split_endpoints(config.endpoint);
  if (endpoints.empty())
    return error(StatusCode::kInvalidArgument,
                 "no coordinator endpoint in '" + config.endpoint + "'");
  if (config.secret.empty()) return error(StatusCode::kInvalidArgument, "empty cluster secret");
  this->config = config;
  curve = control::derive_curve_keys(config.secret);
  name = config.name.empty() ? default_name(config.host) : config.name;
  const control::JoinRequest request = join_request();
  if (Status st = control::validate_join_request(request); !st)
    return error(StatusCode::kInvalidArgument, "join request: " + st.message());

  // One coordinator: the whole deadline (it may still be starting). Several: a slice
  // each, round robin, following a NotLeader's hint, until one admits us.
  std::size_t next = 0;
  Duration backoff = milliseconds(25);
  Status last = error(StatusCode::kUnavailable, "no coordinator tried");
  while (!deadline.passed()) {
    const Deadline attempt =
        endpoints.size() == 1
            ? deadline
            : Deadline{std::min(deadline.at, std::chrono::steady_clock::now() + kJoinAttemptSlice)};
    std::string leader;
    bool move_on = false;
    auto joined = join_at(endpoints[next], request, attempt, &leader, &move_on);
    if (joined) return joined;
    last = joined.status();
    // A rejection (wrong secret, cool-down, full) is the cluster's answer: the caller's.
    if (!move_on) return last;
    const auto hinted = std::find(endpoints.begin(), endpoints.end(), leader);
    next = hinted != endpoints.end() && leader != endpoints[next]
               ? static_cast<std::size_t>(hinted - endpoints.begin())
               : (next + 1) % endpoints.size();
    if (next == 0 && hinted == endpoints.end()) {
      // A whole round without a leader (an election under way, etcd unreachable): back
      // off before the next round, so standbys that answer at once are not flooded.
      backoff = std::min<Duration>(2 * backoff, kJoinAttemptSlice);
      std::this_thread::sleep_until(
          std::min(deadline.at, std::chrono::steady_clock::now() + backoff));
    }
  }
  return last;
}

Result<Joined> CoordinatorClient::Impl::join_at(const std::string& at,
                                                const control::JoinRequest& request,
                                                Deadline deadline, std::string* leader,
                                                bool* move_on) {
  connect(at);
  handshakes.watch(context, dealer);
  Handshake handshake = Handshake::join(config.secret, name);
  send_envelope(dealer, handshake.request(request));

  const std::string coordinator = "coordinator " + endpoint + " ";
  bool heard_back = false;
  for (;;) {
    const TimePoint now = std::chrono::steady_clock::now();
    if (deadline.passed(now)) break;
    zmq::pollitem_t items[] = {{dealer.handle(), 0, ZMQ_POLLIN, 0},
                               {handshakes.events().handle(), 0, ZMQ_POLLIN, 0}};
    poll_items(items, 2, milliseconds(poll_timeout_ms(now, deadline.at)));
    if ((items[1].revents & ZMQ_POLLIN) &&
        handshakes.refused_handshakes() >= HandshakeWatch::kMeaningWrongSecret) {
      const std::string why = HandshakeWatch::wrong_secret("coordinator " + endpoint);
      log.error(why);
      return error(StatusCode::kAuthFailed, why);
    }
    if ((items[0].revents & ZMQ_POLLIN) == 0) continue;
    zmq::message_t msg;
    if (!recv_now(dealer, msg)) continue;
    heard_back = true;
    auto decoded = control::decode_envelope(msg.to_string_view());
    if (!decoded) {
      log.warn("ignored malformed message from " + coordinator +
               "during join: " + decoded.status().message());
      continue;
    }
    const control::Envelope& env = *decoded;
    switch (env.body_case()) {
      case control::Envelope::kChallenge: {
        auto proof = handshake.answer(env.challenge());
        if (!proof) {
          return error(StatusCode::kBadFrame,
                       coordinator + "sent a bad challenge: " + proof.status().message());
        }
        send_envelope(dealer, *proof);
        break;
      }
      case control::Envelope::kJoinRejected: {
        const Status st = handshake.rejection(env.join_rejected());
        log.error(coordinator + st.message());
        return error(st.code(), coordinator + st.message());
      }
      case control::Envelope::kNotLeader:
        *leader = env.not_leader().leader();
        *move_on = true;
        return error(
            StatusCode::kUnavailable,
            coordinator + "is not the leader" + (leader->empty() ? "" : "; " + *leader) + " leads");
      case control::Envelope::kJoinAccepted: {
        if (Status st = handshake.verify(env.join_accepted()); !st) {
          if (st.code() == StatusCode::kAuthFailed) log.error(coordinator + st.message());
          return error(st.code(), coordinator + st.message());
        }
        return admitted(env.join_accepted(), now);
      }
      default:
        log.warn("ignored unexpected " + std::string(control::body_name(env.body_case())) +
                 " during join from " + endpoint);
        break;
    }
  }
  *move_on = true;  // silence, or a handshake cut short: maybe this one died
  if (!heard_back) {
    return error(StatusCode::kUnavailable,
                 "no answer from " + coordinator +
                     "by the deadline (unreachable, or not a Tributary coordinator)");
  }
  return error(StatusCode::kTimedOut,
               "join handshake with " + coordinator + "did not finish by the deadline");
}

Result<Joined> CoordinatorClient::Impl::admitted(const control::JoinAccepted& acc, TimePoint now) {
  membership::View first;
  if (acc.has_view() && acc.view().epoch() > 0) {
    auto v = control::view_from_proto(acc.view());
    if (!v) {
      return error(StatusCode::kBadFrame,
                   "coordinator " + endpoint + " sent a bad view: " + v.status().message());
    }
    if (!v->contains(acc.member_id())) {
      return error(StatusCode::kBadFrame,
                   "coordinator " + endpoint + " admitted us in a view without us");
    }
    first = std::move(v).value();
  }
  {
    std::lock_guard lock(mu);
    id = acc.member_id();
    instance_id = acc.instance_id();
    if (acc.heartbeat_interval_ms() > 0) {
      interval = paced_interval(acc.heartbeat_interval_ms());
    } else if (config.heartbeat_interval > Duration::zero()) {
      interval = config.heartbeat_interval;
    }
    last_ack = now;
  }
  publish_view(first);
  log.info("joined coordinator " + endpoint + " as member " + std::to_string(acc.member_id()) +
           " (" + name + ")");
  // The handshake is done: resumes later talk over the same, established CURVE session.
  handshakes.stop(dealer);
  // The worker thread takes the sockets over; starting it is the memory barrier.
  const std::string wake_endpoint = "inproc://tributary-client-wake";
  wake_rx = zmq::socket_t(context, zmq::socket_type::pair);
  wake_rx.bind(wake_endpoint);
  wake_tx = zmq::socket_t(context, zmq::socket_type::pair);
  wake_tx.connect(wake_endpoint);
  worker = std::thread([this] { run(); });
  return Joined{acc.member_id(), first};
}

// The coordinator does not know us although we are a member: it restarted (its journal
// lists us) or lost us. Re-authenticate with our member id; heartbeats pause meanwhile.
// An attempt that got no answer is repeated with the same handshake: the coordinator
// answers a repeated request with the same challenge and ignores one from a connection
// it already re-admitted, so answers to an earlier copy still verify.
void CoordinatorClient::Impl::start_resume(TimePoint now, std::string_view why) {
  if (resume && now - resume->started < 2 * interval + milliseconds(500)) return;  // in progress
  if (!resume) {
    resume = Resume{now, Handshake::resume(config.secret, name, id)};
    log.info("resuming member " + std::to_string(id) + " with coordinator " + endpoint + ": " +
             std::string(why));
  } else {
    resume->started = now;
    log.debug("repeating the resume of member " + std::to_string(id) + ": " + std::string(why));
  }
  send_envelope(dealer, resume->handshake.request(join_request()));
}

void CoordinatorClient::Impl::handle_resume(const control::Envelope& env, TimePoint now) {
  const std::string coordinator = "coordinator " + endpoint + " ";
  switch (env.body_case()) {
    case control::Envelope::kChallenge: {
      auto proof = resume->handshake.answer(env.challenge());
      if (!proof) {
        log.warn("ignored bad challenge from " + coordinator + proof.status().message());
        return;
      }
      send_envelope(dealer, *proof);
      return;
    }
    case control::Envelope::kJoinAccepted: {
      if (Status st = resume->handshake.verify(env.join_accepted()); !st) {
        // CURVE already proved the coordinator holds the secret: an accept that does not
        // verify answers an earlier challenge of this resume. Wait for ours.
        log.warn("ignored an answer to an earlier resume attempt from " + coordinator +
                 st.message());
        return;
      }
      instance_id = env.join_accepted().instance_id();
      resume.reset();
      abandoned.clear();
      {
        std::lock_guard lock(mu);
        last_ack = now;
      }
      log.info("resumed member " + std::to_string(id) + " with coordinator " + endpoint +
               " (instance " + std::to_string(instance_id) + ")");
      return;
    }
    case control::Envelope::kJoinRejected: {
      const auto& rejected = env.join_rejected();
      const Status st = resume->handshake.rejection(rejected);
      if (rejected.kind() == control::JoinRejected::PROTOCOL ||
          rejected.kind() == control::JoinRejected::FULL ||
          rejected.kind() == control::JoinRejected::AUTH_FAILED) {
        // Out of order (a proof for a challenge the coordinator replaced), or busy: the
        // next attempt may pass. A real secret mismatch never gets past CURVE.
        log.warn(coordinator + st.message() + "; trying again");
        return;
      }
      resume.reset();
      return mark_evicted(coordinator + st.message());
    }
    default: return;
  }
}

}  // namespace tributary::control_client
