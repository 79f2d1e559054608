// The coordinator's half of admission: a JoinRequest or ResumeRequest is answered with a
// Challenge (the pending handshake lives in the JoinGate); a JoinProof that verifies is
// put to the membership, and JoinAccepted carries the coordinator's own proof. Joins and
// resumes run the same exchange; a resume names the member id it claims back.
#include <algorithm>

#include "coordinator/service.h"

namespace tributary::coordinator {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using R = control::JoinRejected;

void Coordinator::Service::on_admission_request(const Peer& peer,
                                                const control::JoinRequest& request,
                                                MemberId resume_id) {
  if (const auto id = member_of(peer.identity)) {
    // An agent that retried its request after the first one was answered: the answer it
    // has is the one that counts; a second answer would only confuse it.
    log_.debug("ignored a repeated " + std::string(resume_id ? "resume" : "join") +
               " request from member " + std::to_string(*id) + " (" + peer.name() + ")");
    return;
  }
  if (Status st = control::validate_join_request(request); !st) {
    return reject(peer, R::INVALID_REQUEST,
                  std::string(resume_id ? "invalid resume request: " : "invalid join request: ") +
                      st.message());
  }
  auto nonce = gate_.challenge(peer.identity, peer.address, control::labels_from_request(request),
                               clock_.now(), resume_id);
  if (!nonce) return reject(peer, R::FULL, "coordinator busy: " + nonce.status().message());
  control::Envelope out;
  out.mutable_challenge()->set_nonce(control::to_bytes(*nonce));
  send(peer.identity, out);
}

void Coordinator::Service::on_join_proof(const Peer& peer, const control::JoinProof& proof) {
  auto client_nonce = control::nonce_from_bytes(proof.client_nonce());
  auto mac = control::mac_from_bytes(proof.mac());
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
      refusal("join-auth", "rejected join from " + who + ": wrong cluster secret");
      return reject(peer, R::AUTH_FAILED, "wrong cluster secret");
    }
    if (member_of(peer.identity)) return;  // a repeated proof of an admitted member
    return reject(peer, R::PROTOCOL, admitted.status().message());
  }
  admit(peer, *admitted, now);
}

void Coordinator::Service::admit(const Peer& peer, const JoinGate::Admitted& admitted,
                                 TimePoint now) {
  const bool resuming = admitted.resume_id != 0;
  auto joined = resuming ? membership_->resume(admitted.resume_id, admitted.labels, now)
                         : membership_->join(admitted.labels, now);
  if (!joined) {
    if (resuming)
      return reject(peer, R::UNKNOWN_MEMBER, "cannot resume: " + joined.status().message());
    if (joined.status().code() == StatusCode::kEvicted)
      return reject(peer, R::COOLDOWN, joined.status().message());
    if (joined.status().code() == StatusCode::kInvalidArgument)
      return reject(peer, R::INVALID_REQUEST, joined.status().message());
    return reject(peer, R::FULL, joined.status().message());
  }
  const MemberId id = joined->id;
  if (resuming) forget_member(id);  // a reconnect: the old connection is dead
  member_of_[peer.identity] = id;
  route_of_[id] = peer.identity;
  const auto& l = admitted.labels;
  if (resuming) {
    log_.info("member " + std::to_string(id) + " ('" + l.name + "') resumed from " + peer.name());
  } else {
    // The id counter, so that a restart never hands this id out again.
    if (store_ && !recorded(store_->record({id, 0, {}}), "this member id")) return;
    // Metrics and snapshots first: whoever hears of the join may look at them at once.
    metrics_->joined();
    log_.info("member " + std::to_string(id) + " joined from " + peer.name() + ": name '" + l.name +
              "', host '" + l.host + "', zone '" + l.zone + "', data " + l.data_address +
              (joined->decisions.new_view || membership_->epoch() == 0
                   ? ""
                   : " (waits for a step boundary)"));
  }
  publish_snapshot();

  control::Envelope out;
  auto* acc = out.mutable_join_accepted();
  acc->set_member_id(id);
  if (!record_view(joined->decisions)) return;  // leadership lost: nothing goes out
  if (joined->decisions.new_view) {
    control::view_to_proto(*joined->decisions.new_view, acc->mutable_view());
  }
  acc->set_heartbeat_interval_ms(interval_ms());
  acc->set_coordinator_mac(control::to_bytes(gate_.coordinator_proof(admitted, id)));
  acc->set_instance_id(instance_id_);
  send(peer.identity, out);
  apply(joined->decisions, id, /*journaled=*/true);
}

void Coordinator::Service::reject(const Peer& peer, control::JoinRejected::Kind kind,
                                  const std::string& reason) {
  if (kind != R::AUTH_FAILED)
    refusal("join-rejected", "rejected join from " + peer.name() + ": " + reason);
  control::Envelope out;
  out.mutable_join_rejected()->set_reason(reason);
  out.mutable_join_rejected()->set_kind(kind);
  send(peer.identity, out);
}

}  // namespace tributary::coordinator
