// The client's thread: heartbeats (with the Ready, boundary request or Leave that must be
// repeated until answered), fire-and-forget messages from API threads, and everything the
// coordinator pushes: views, Go, acknowledgements, evictions, a restart noticed.
#include <prometheus/gauge.h>

#include <algorithm>
#include <cerrno>

#include "control_client/client_impl.h"
#include "control/status_codec.h"

namespace tributary::control_client {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

bool send_envelope(zmq::socket_t& socket, const control::Envelope& envelope) {
  const std::string bytes = control::encode_envelope(envelope);
  return send_bytes(socket, zmq::buffer(bytes), zmq::send_flags::dontwait);
}

int poll_items(zmq::pollitem_t* items, std::size_t count, milliseconds timeout) {
  try {
    return zmq::poll(items, count, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    for (std::size_t i = 0; i < count; ++i) items[i].revents = 0;
    return 0;  // the callers loop and recompute their deadlines
  }
}

bool recv_now(zmq::socket_t& socket, zmq::message_t& message) {
  for (;;) {
    try {
      return socket.recv(message, zmq::recv_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

bool send_bytes(zmq::socket_t& socket, zmq::const_buffer bytes, zmq::send_flags flags) {
  for (;;) {
    try {
      return socket.send(bytes, flags).has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

long poll_timeout_ms(TimePoint now, TimePoint until) {
  if (until <= now) return 0;
  // Round up: a 0 ms poll for a deadline 0.4 ms away would spin.
  const auto ms = duration_cast<milliseconds>(until - now + milliseconds(1) - Duration{1}).count();
  return static_cast<long>(std::min<std::int64_t>(ms, 1000));
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
  log.warn("coordinator " + endpoint + " removed member " + std::to_string(id) + ": " + reason);
  cv.notify_all();
  tell_listener(error(StatusCode::kEvicted, "removed by the coordinator: " + reason));
}

void CoordinatorClient::Impl::publish_view(membership::View v) {
  {
    std::lock_guard lock(mu);
    if (v.epoch <= view.epoch) return;  // stale or duplicate push
    view = v;
    if (size_gauge != nullptr) size_gauge->Set(static_cast<double>(view.size()));
    if (epoch_gauge != nullptr) epoch_gauge->Set(static_cast<double>(view.epoch));
  }
  cv.notify_all();
  tell_listener(std::move(v));
}

void CoordinatorClient::Impl::on_view_delta(const control::ViewDelta& pd, TimePoint now) {
  auto delta = control::view_delta_from_proto(pd);
  std::optional<Result<membership::View>> rebuilt;
  if (delta) {
    std::lock_guard lock(mu);
    if (delta->epoch <= view.epoch) return;  // stale or duplicate
    rebuilt.emplace(membership::apply_delta(view, *delta));
  }
  const Status why = !delta ? delta.status() : rebuilt->status();
  if (!why) {
    // Expected after a missed view (another base); anything else is a bug at one end.
    log.info("asking coordinator " + endpoint + " for the whole view: " + why.message());
    want_view = true;
    return send_heartbeat(now, /*alone=*/true);
  }
  if (!(*rebuilt)->contains(id)) {
    log.warn("ignored view epoch " + std::to_string((*rebuilt)->epoch) +
             " that does not include member " + std::to_string(id));
    return;
  }
  publish_view(std::move(*rebuilt).value());
}

void CoordinatorClient::Impl::run() {
  TimePoint next_heartbeat = std::chrono::steady_clock::now();
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
  for (;;) {
    TimePoint now = std::chrono::steady_clock::now();
    zmq::pollitem_t items[] = {{wake_rx.handle(), 0, ZMQ_POLLIN, 0},
                               {dealer.handle(), 0, ZMQ_POLLIN, 0}};
    poll_items(items, 2, milliseconds(poll_timeout_ms(now, next_heartbeat)));
    now = std::chrono::steady_clock::now();
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t cmd;
      while (recv_now(wake_rx, cmd)) {
        if (cmd.to_string_view() == "q") return;
        if (cmd.to_string_view() == "l") next_heartbeat = now;  // send the Leave right away, below
        if (cmd.to_string_view() == "r") next_heartbeat = now;  // send a new Ready right away
      }
      flush_outbox();
    }
    if (items[1].revents & ZMQ_POLLIN) {
      zmq::message_t msg;
      while (recv_now(dealer, msg)) {
        auto decoded = control::decode_envelope(msg.to_string_view());
        if (!decoded) {
          log.warn("ignored malformed message from coordinator " + endpoint + ": " +
                   decoded.status().message());
          continue;
        }
        handle(*decoded, now);
      }
    }
    if (now < next_heartbeat) continue;
    flush_outbox();
    send_heartbeat(now);
    std::lock_guard lock(mu);
    next_heartbeat = evicted || left ? TimePoint::max() : now + interval;
  }
}

// One heartbeat interval's messages: a Heartbeat (a Leave while leaving, repeated until
// acknowledged), and the Ready and boundary request still waiting for their answers.
Duration CoordinatorClient::Impl::paced_interval(std::uint32_t asked_ms) const {
  // Never faster than configured, never slower than kMaxPacedInterval (a coordinator
  // that asked for more would have its own timeouts stretched as far: a bound, not a cap
  // it is expected to reach).
  const Duration asked = std::min<Duration>(milliseconds(asked_ms), kMaxPacedInterval);
  return std::max(asked, config.heartbeat_interval);
}

void CoordinatorClient::Impl::send_heartbeat(TimePoint now, bool alone) {
  control::Envelope out;
  std::optional<control::Envelope> ready_env;
  std::optional<control::Envelope> boundary_env;
  std::optional<control::Envelope> round_env;
  std::optional<control::Envelope> done_env;
  TimePoint last_heard;
  {
    std::lock_guard lock(mu);
    if (evicted || left) return;
    last_heard = last_ack;
    if (leaving) {
      auto* l = out.mutable_leave();
      l->set_member_id(id);
      l->set_epoch(leave_terms.epoch);
      l->set_holds_result(leave_terms.holds_result);
    } else {
      auto* hb = out.mutable_heartbeat();
      hb->set_member_id(id);
      hb->set_epoch(view.epoch);
      hb->set_step(step.load());
      hb->set_want_view(want_view);
      ++heartbeats_since_links;
      if (links_epoch == view.epoch && links_epoch != 0 &&
          (links_changed || heartbeats_since_links >= kLinksResendEvery)) {
        auto* report = hb->mutable_links();
        report->set_epoch(links_epoch);
        for (const membership::LinkPath& l : links) control::link_to_proto(l, report->add_links());
        links_changed = false;
        heartbeats_since_links = 0;
      }
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
    if (pending_round && pending_round->epoch >= view.epoch && !round_answer(*pending_round)) {
      round_env.emplace();
      auto* r = round_env->mutable_round_ready();
      r->set_member_id(id);
      r->set_epoch(pending_round->epoch);
      r->set_round(pending_round->round);
      r->set_weight(pending_round->weight);
      r->set_deadline_ms(static_cast<std::uint32_t>(
          duration_cast<milliseconds>(pending_round->deadline).count()));
      r->set_min_participants(pending_round->min_participants);
    }
    if (pending_done && pending_done->first >= view.epoch && !commits.contains(*pending_done)) {
      done_env.emplace();
      auto* d = done_env->mutable_round_done();
      d->set_member_id(id);
      d->set_epoch(pending_done->first);
      d->set_round(pending_done->second);
    }
  }
  // A resume that got no answer (the coordinator may still be starting) is repeated; a
  // silent coordinator among several is left for the next.
  // A Leave, too, must reach the leader; with one coordinator it is only repeated.
  if (alone) {  // the heartbeat alone, now: a probe's answer, or asking for the view
    if (out.has_heartbeat() && send_envelope(dealer, out)) want_view = false;
    return;
  }
  if ((!out.has_leave() || endpoints.size() > 1) && check_failover(now, last_heard)) return;
  if (send_envelope(dealer, out) && out.has_heartbeat()) want_view = false;
  if (ready_env) send_envelope(dealer, *ready_env);
  if (boundary_env) send_envelope(dealer, *boundary_env);
  if (round_env) send_envelope(dealer, *round_env);
  if (done_env) send_envelope(dealer, *done_env);
}

void CoordinatorClient::Impl::handle(const control::Envelope& env, TimePoint now) {
  using E = control::Envelope;
  if (resume) {
    switch (env.body_case()) {
      case E::kChallenge:
      case E::kJoinAccepted:
      case E::kJoinRejected: return handle_resume(env, now);
      case E::kNotLeader: return on_not_leader(env.not_leader(), now);
      case E::kEvicted:
      case E::kHeartbeatAck: return;  // answers to what we sent before the restart was noticed
      default: break;
    }
  }
  switch (env.body_case()) {
    case E::kView: {
      auto v = control::view_from_proto(env.view());
      if (!v) {
        log.warn("ignored bad view from coordinator " + endpoint + ": " + v.status().message());
        return;
      }
      if (!v->contains(id)) {
        log.warn("ignored view epoch " + std::to_string(v->epoch) +
                 " that does not include member " + std::to_string(id));
        return;
      }
      publish_view(std::move(v).value());
      return;
    }
    case E::kHeartbeatAck: {
      const auto& ack = env.heartbeat_ack();
      if (ack.instance_id() != 0 && instance_id != 0 && ack.instance_id() != instance_id) {
        return start_resume(now, "coordinator instance changed");
      }
      joiners_pending.store(ack.joiners_pending());
      std::lock_guard lock(mu);
      last_ack = now;
      if (ack.heartbeat_interval_ms() > 0) interval = paced_interval(ack.heartbeat_interval_ms());
      return;
    }
    case E::kViewDelta: return on_view_delta(env.view_delta(), now);
    case E::kProbe: return send_heartbeat(now, /*alone=*/true);
    case E::kEvicted: {
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
    case E::kGo: {
      const auto& g = env.go();
      Go go{g.epoch(),
            g.commit_through(),
            {g.joiners().begin(), g.joiners().end()},
            g.state_source()};
      {
        std::lock_guard lock(mu);
        if (last_go && last_go->epoch >= go.epoch) return;  // a resend
        last_go = std::move(go);
      }
      cv.notify_all();
      return;
    }
    case E::kNotLeader: return on_not_leader(env.not_leader(), now);
    case E::kRoundDecision: {
      membership::RoundDecision d = control::round_decision_from_proto(env.round_decision());
      {
        std::lock_guard lock(mu);
        rounds[d.round] = std::move(d);
        while (rounds.size() > membership::kRoundsKept) rounds.erase(rounds.begin());
      }
      cv.notify_all();
      return;
    }
    case E::kRoundCommit: {
      {
        std::lock_guard lock(mu);
        commits.insert({env.round_commit().epoch(), env.round_commit().round()});
        while (commits.size() > membership::kRoundsKept) commits.erase(commits.begin());
      }
      cv.notify_all();
      return;
    }
    case E::kLeaveAck: {
      const auto& ack = env.leave_ack();
      {
        std::lock_guard lock(mu);
        if (!ack.must_wait().empty()) {
          // An answer to a Leave sent before the member moved on is stale: the Leave being
          // sent now names a later epoch.
          if (!leaving || ack.epoch() != leave_terms.epoch) return;
          leaving = false;  // heartbeats again while it moves to the newer view
          leave_must_wait = ack.must_wait();
        } else {
          left = true;
        }
      }
      cv.notify_all();
      return;
    }
    default:
      log.warn("ignored unexpected " + std::string(control::body_name(env.body_case())) +
               " from coordinator " + endpoint);
      return;
  }
}

}  // namespace tributary::control_client
