// The coordinator's message handlers (everything but admission, which is admission.cc)
// and the carrying out of membership decisions: who is told they are out, the journal,
// the view to every member, Go to the Ready.
#include <algorithm>
#include <cstdint>

#include "control/status_codec.h"
#include "coordinator/service.h"
#include "core/check.h"

namespace tributary::coordinator {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

void Coordinator::Service::handle(const Peer& peer, const control::Envelope& env) {
  using E = control::Envelope;
  metrics_->message(control::body_name(env.body_case()));
  if (!leading_) return answer_not_leader(peer);
  switch (env.body_case()) {
    case E::kJoinRequest: return on_admission_request(peer, env.join_request(), 0);
    case E::kResumeRequest:
      return on_admission_request(peer, env.resume_request().join(),
                                  env.resume_request().member_id());
    case E::kJoinProof: return on_join_proof(peer, env.join_proof());
    case E::kHeartbeat: return on_heartbeat(peer, env.heartbeat());
    case E::kLeave: return on_leave(peer, env.leave());
    case E::kFailureReport: return on_failure_report(peer, env.failure_report());
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
    case E::kStepTiming: {
      const auto& t = env.step_timing();
      if (const auto id = sender(peer, t.member_id(), "step timing")) {
        status_.step_reported(*id, t.step(), t.compute_seconds(), t.arrival_unix_ns());
        apply(membership_->step_timing(*id, t.step(), t.compute_seconds(), clock_.now()));
      }
      return;
    }
    case E::kRoundReady: return on_round_ready(peer, env.round_ready());
    case E::kRoundDone: {
      const auto& d = env.round_done();
      if (const auto id = sender(peer, d.member_id(), "round done")) {
        apply_rounds(rounds_.done(*id, d.epoch(), d.round()));
      }
      return;
    }
    case E::kStatusRequest: return on_status_request(peer, env.status_request());
    case E::kStatusProof: return on_status_proof(peer, env.status_proof());
    default:
      return drop_malformed(peer, std::string("agent sent coordinator-only message '") +
                                      std::string(control::body_name(env.body_case())) + "'");
  }
}

std::optional<membership::MemberId> Coordinator::Service::sender(const Peer& peer, MemberId claimed,
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

void Coordinator::Service::on_failure_report(const Peer& peer, const control::FailureReport& f) {
  const auto id = sender(peer, f.reporter(), "failure report");
  if (!id) return;
  log_.warn("member " + std::to_string(*id) + " reports " +
            (f.suspect() ? "member " + std::to_string(f.suspect()) + " failed"
                         : std::string("a failure (no suspect named)")) +
            " in epoch " + std::to_string(f.epoch()) + ": " + f.detail());
  apply(membership_->failure_report(*id, f.epoch(), f.suspect(), clock_.now()));
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
  if (!sender(peer, hb.member_id(), "heartbeat")) return;
  if (peer.fd >= 0) member_on_fd_[peer.fd] = *id;
  if (hb.has_links()) {
    // Bounds were checked by the codec; a report that is not this member's to give (a
    // link to a peer outside its view) is simply never shown (status_report.cc).
    std::vector<membership::LinkPath> links;
    for (const auto& l : hb.links().links()) {
      if (auto link = control::link_from_proto(l)) links.push_back(std::move(*link));
    }
    status_.links_reported(*id, hb.links().epoch(), std::move(links));
  }
  const auto decision =
      membership_->heartbeat(*id, hb.epoch(), hb.step(), clock_.now(), hb.want_view());
  if (!decision.refused.empty()) {
    metrics_->refused_claim();
    refusal("claim", "refused a claim: " + decision.refused);
  }
  out.mutable_heartbeat_ack()->set_epoch(decision.current_epoch);
  out.mutable_heartbeat_ack()->set_joiners_pending(decision.joiners_pending);
  out.mutable_heartbeat_ack()->set_instance_id(instance_id_);
  out.mutable_heartbeat_ack()->set_heartbeat_interval_ms(interval_ms());
  send(peer.identity, out);
  if (decision.resend_view) {
    // The member missed a push (its pipe was full, or it reconnected) or could not apply
    // a delta: catch it up with the whole view.
    send_encoded(peer.identity, encoded_view().full);
  }
}

void Coordinator::Service::on_leave(const Peer& peer, const control::Leave& leave) {
  control::Envelope ack;
  ack.mutable_leave_ack()->set_member_id(leave.member_id());
  if (!member_of(peer.identity)) return send(peer.identity, ack);  // leaving is done
  if (const auto id = sender(peer, leave.member_id(), "leave")) {
    const std::string wait =
        membership_->leave_must_wait(*id, {leave.epoch(), leave.holds_result()});
    if (!wait.empty()) {
      log_.info("member " + std::to_string(*id) + " asked to leave and must wait: " + wait);
      ack.mutable_leave_ack()->set_must_wait(wait);
      ack.mutable_leave_ack()->set_epoch(leave.epoch());
      return send(peer.identity, ack);
    }
    apply(membership_->leave(*id, clock_.now()));  // sends the LeaveAck
  }
}

void Coordinator::Service::drop_malformed(const Peer& peer, const std::string& why) {
  metrics_->malformed();
  blocked_.insert(peer.identity);
  gate_.forget(peer.identity);
  const auto id = member_of(peer.identity);
  refusal("malformed", "dropped malformed message from " + peer.name() +
                           (id ? " (member " + std::to_string(*id) + ")" : std::string()) + ": " +
                           why);
  if (id) apply(membership_->remove(*id, membership::RemovalReason::kMalformed, clock_.now()));
}

void Coordinator::Service::apply(const membership::Decisions& decisions, MemberId skip,
                                 bool journaled) {
  if (decisions.empty()) return;
  // Recorded before anything goes out; a leader that lost its lease sends nothing.
  if (!journaled && !record_view(decisions)) return;
  publish_snapshot();  // before any message goes out, so a peer that reacts sees it
  for (const auto& line : decisions.log) log_.info(line);
  for (const auto& line : decisions.refused) {
    metrics_->refused_claim();
    refusal("claim", "refused a claim: " + line);
  }
  for (const auto& removal : decisions.removed) apply_removal(removal);
  if (decisions.new_view) {
    broadcast_view(*decisions.new_view, decisions.cause, skip);
    // After the view: rounds its epoch decides again. Nothing of an older epoch commits
    // from now on, so a commit a member receives always precedes the newer view.
    apply_rounds(rounds_.on_view(*decisions.new_view, clock_.now()));
  }
  if (decisions.go) send_go(*decisions.go);
  if (decisions.probe) send_probe();
}

// LeaveAck to a member that left, Evicted (with the reason) to one that was removed.
void Coordinator::Service::apply_removal(const membership::Removal& removal) {
  control::Envelope out;
  if (removal.reason == membership::RemovalReason::kLeft) {
    metrics_->left();
    log_.info("member " + std::to_string(removal.id) + " ('" + removal.name + "') left");
    out.mutable_leave_ack()->set_member_id(removal.id);
  } else {
    metrics_->removed(removal.reason);
    metrics_->evicted(removal.reason, removal.name);
    std::string why(membership::to_string(removal.reason));
    if (removal.reason == membership::RemovalReason::kHeartbeatTimeout) {
      why += " (silent for more than " +
             std::to_string(duration_cast<milliseconds>(config_.heartbeat_timeout).count()) +
             " ms)";
    } else if (removal.reported_by != 0) {
      why += " (reported by member " + std::to_string(removal.reported_by) + " '" +
             removal.reporter_name + "')";
    }
    log_.warn("removed member " + std::to_string(removal.id) + " ('" + removal.name + "'): " + why);
    out.mutable_evicted()->set_member_id(removal.id);
    out.mutable_evicted()->set_reason(why);
    out.mutable_evicted()->set_instance_id(instance_id_);
  }
  if (auto route = route_of_.find(removal.id); route != route_of_.end()) send(route->second, out);
  forget_member(removal.id);
}

void Coordinator::Service::broadcast_view(const membership::View& view, membership::ViewCause cause,
                                          MemberId skip) {
  metrics_->view_change(cause);
  std::string ranks;
  for (const auto& m : view.members) {
    if (!ranks.empty()) ranks += ' ';
    ranks += std::to_string(m.id) + "@" + m.host;
  }
  log_.info("view epoch " + std::to_string(view.epoch) + " (" +
            std::string(membership::to_string(cause)) + "): " + std::to_string(view.size()) +
            " members, ring [" + ranks + "]");
  // A view that is no longer the current one goes whole (not cached); the current one
  // goes as a delta to each member known to hold its base, whole to the others.
  std::string older;
  if (view.epoch != membership_->epoch()) {
    control::Envelope out;
    control::view_to_proto(view, out.mutable_view());
    older = control::encode_envelope(out);
  }
  const EncodedView* encoded = older.empty() ? &encoded_view() : nullptr;
  const std::string& full = encoded ? encoded->full : older;
  const bool has_delta = encoded && !encoded->delta.empty();
  // One buffer each for all: ZeroMQ shares a message's content between copies (reference
  // counted), so each member costs no 170 KB allocation and copy at 4,096 members.
  zmq::message_t shared_full(full.data(), full.size());
  zmq::message_t shared_delta;
  if (has_delta) shared_delta.rebuild(encoded->delta.data(), encoded->delta.size());
  std::size_t deltas = 0;
  std::size_t fulls = 0;
  for (const auto& m : view.members) {
    if (m.id == skip) continue;
    auto route = route_of_.find(m.id);
    TRIB_CHECK(route != route_of_.end()) << "member " << m.id << " in the view has no route";
    const membership::PeerState* peer = membership_->find(m.id);
    const bool delta = has_delta && peer && peer->known_epoch == encoded->base_epoch;
    zmq::message_t copy;
    copy.copy(delta ? shared_delta : shared_full);
    router_.send(zmq::buffer(route->second), zmq::send_flags::sndmore);
    (void)router_.send(copy, zmq::send_flags::dontwait);
    ++(delta ? deltas : fulls);
  }
  metrics_->views_sent(deltas, has_delta ? encoded->delta.size() : 0, fulls, full.size());
  // Not "view epoch E ...": tests count the issued epochs by that line.
  log_.info("epoch " + std::to_string(view.epoch) + " went out as " + std::to_string(deltas) +
            " deltas (" + std::to_string(has_delta ? encoded->delta.size() : 0) + " bytes) and " +
            std::to_string(fulls) + " full views (" + std::to_string(full.size()) + " bytes)");
}

void Coordinator::Service::send_go(const membership::GoDecision& g) {
  control::Envelope out;
  auto* go = out.mutable_go();
  go->set_epoch(g.epoch);
  go->set_commit_through(g.commit_through);
  for (auto j : g.joiners) go->add_joiners(j);
  go->set_state_source(g.state_source);
  if (g.recipients.size() > 1 || (g.recipients.size() == 1 && membership_->view().size() == 1)) {
    log_.info("go epoch " + std::to_string(g.epoch) + ": commit_through " +
              std::to_string(g.commit_through) + ", " + std::to_string(g.joiners.size()) +
              " joiners, state source " + std::to_string(g.state_source));
  }
  const std::string bytes = control::encode_envelope(out);
  for (MemberId id : g.recipients) {
    if (auto route = route_of_.find(id); route != route_of_.end())
      send_encoded(route->second, bytes);
  }
}

void Coordinator::Service::on_round_ready(const Peer& peer, const control::RoundReady& r) {
  if (const auto id = sender(peer, r.member_id(), "round ready")) {
    apply_rounds(rounds_.ready(control::round_ready_from_proto(r), membership_->view(),
                               clock_.now()));
  }
}

void Coordinator::Service::apply_rounds(const membership::RoundOutput& out) {
  if (out.empty()) return;
  for (const auto& line : out.log) log_.info(line);
  for (const auto& line : out.refused) {
    metrics_->refused_claim();
    refusal("claim", "refused a claim: " + line);
  }
  auto encode = [](const membership::RoundDecision& d) {
    control::Envelope env;
    control::round_decision_to_proto(d, env.mutable_round_decision());
    return control::encode_envelope(env);
  };
  if (out.late > 0) metrics_->federated_late(out.late);
  for (const auto& d : out.decided) {
    metrics_->federated_round(d.failed ? "failed" : "decided");
    const std::string bytes = encode(d);
    for (const auto& m : membership_->view().members) {
      if (auto route = route_of_.find(m.id); route != route_of_.end())
        send_encoded(route->second, bytes);
    }
  }
  for (const auto& [id, d] : out.replies) {
    if (auto route = route_of_.find(id); route != route_of_.end())
      send_encoded(route->second, encode(d));
  }
  for (const auto& c : out.committed) {
    if (!c.resend) metrics_->federated_round("committed");
    control::Envelope env;
    env.mutable_round_commit()->set_epoch(c.epoch);
    env.mutable_round_commit()->set_round(c.round);
    const std::string bytes = control::encode_envelope(env);
    for (MemberId id : c.recipients) {
      if (auto route = route_of_.find(id); route != route_of_.end())
        send_encoded(route->second, bytes);
    }
  }
}

void Coordinator::Service::send_probe() {
  control::Envelope out;
  out.mutable_probe()->set_epoch(membership_->epoch());
  const std::string bytes = control::encode_envelope(out);
  for (const auto& m : membership_->view().members) {
    if (auto route = route_of_.find(m.id); route != route_of_.end())
      send_encoded(route->second, bytes);
  }
}

const Coordinator::Service::EncodedView& Coordinator::Service::encoded_view() {
  const membership::View& view = membership_->view();
  if (encoded_view_.epoch == view.epoch && !encoded_view_.full.empty()) return encoded_view_;
  EncodedView enc;
  enc.epoch = view.epoch;
  control::Envelope out;
  control::view_to_proto(view, out.mutable_view());
  enc.full = control::encode_envelope(out);
  // Once per epoch: make_delta rebuilds the view from the delta to prove it (view_delta.h).
  if (auto delta = membership::make_delta(delta_base_, view)) {
    control::Envelope d;
    control::view_delta_to_proto(*delta, d.mutable_view_delta());
    enc.delta = control::encode_envelope(d);
    enc.base_epoch = delta->base_epoch;
  }
  encoded_view_ = std::move(enc);
  delta_base_ = view;
  return encoded_view_;
}

std::uint32_t Coordinator::Service::interval_ms() const {
  const Duration d = membership_ ? membership_->heartbeat_interval() : interval();
  return static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(duration_cast<milliseconds>(d).count(), 1, UINT32_MAX));
}

void Coordinator::Service::send(const std::string& identity, const control::Envelope& env) {
  send_encoded(identity, control::encode_envelope(env));
}

void Coordinator::Service::send_encoded(const std::string& identity, const std::string& bytes) {
  // ROUTER drops what it cannot route or queue instead of blocking; never wait on a peer.
  router_.send(zmq::buffer(identity), zmq::send_flags::sndmore);
  (void)router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
}

void Coordinator::Service::forget_member(MemberId id) {
  auto route = route_of_.find(id);
  if (route == route_of_.end()) return;
  member_of_.erase(route->second);
  route_of_.erase(route);
  std::erase_if(member_on_fd_, [id](const auto& e) { return e.second == id; });
}

}  // namespace tributary::coordinator
