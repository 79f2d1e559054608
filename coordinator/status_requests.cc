// The coordinator's answers to `tributary status`: a StatusRequest gets a Challenge; a
// StatusProof that verifies gets the status report (coordinator/status_report.h) under
// the coordinator's MAC. Read-only: nothing here touches the membership, the join gate
// or the routes, so asking never makes the asker a member nor disturbs anyone.
#include <chrono>

#include "control/status_codec.h"
#include "coordinator/service.h"

namespace tributary::coordinator {

void Coordinator::Service::on_status_request(const Peer& peer, const control::StatusRequest& r) {
  if (r.protocol_version() != control::kProtocolVersion) {
    return deny_status(peer, "protocol version " + std::to_string(r.protocol_version()) +
                                 ", coordinator speaks " +
                                 std::to_string(control::kProtocolVersion));
  }
  auto nonce = status_gate_.challenge(peer.identity, clock_.now());
  if (!nonce) return deny_status(peer, "coordinator busy: " + nonce.status().message());
  control::Envelope out;
  out.mutable_challenge()->set_nonce(control::to_bytes(*nonce));
  send(peer.identity, out);
}

void Coordinator::Service::on_status_proof(const Peer& peer, const control::StatusProof& proof) {
  auto client_nonce = control::nonce_from_bytes(proof.client_nonce());
  auto mac = control::mac_from_bytes(proof.mac());
  if (!client_nonce || !mac) {
    status_gate_.forget(peer.identity);
    return drop_malformed(
        peer, "status proof: " + (!client_nonce ? client_nonce.status() : mac.status()).message());
  }
  auto verified = status_gate_.verify(peer.identity, *client_nonce, *mac, clock_.now());
  if (!verified) {
    if (verified.status().code() == StatusCode::kAuthFailed) {
      metrics_->auth_failed();
      log_.warn("refused a status request from " + peer.name() + ": wrong cluster secret");
      return deny_status(peer, "wrong cluster secret");
    }
    return deny_status(peer, verified.status().message());
  }
  StatusContext context;
  context.instance_id = instance_id_;
  context.started_at = started_at_;
  context.now = clock_.now();
  context.unix_ms = unix_ms();
  context.heartbeat_interval = membership_->heartbeat_interval();
  context.suspect_after = membership_->confirm_silence(context.now);
  context.handshakes_open = gate_.pending();
  control::StatusReport report;
  control::status_to_proto(build_status(*membership_, status_, context), &report);
  control::Envelope out;
  auto* reply = out.mutable_status_reply();
  reply->set_report(report.SerializeAsString());
  reply->set_mac(control::to_bytes(status_gate_.reply_mac(*verified, reply->report())));
  log_.debug("answered a status request from " + peer.name() + " (" +
             std::to_string(reply->report().size()) + " bytes)");
  send(peer.identity, out);
}

void Coordinator::Service::deny_status(const Peer& peer, const std::string& reason) {
  control::Envelope out;
  out.mutable_status_denied()->set_reason(reason);
  send(peer.identity, out);
}

std::int64_t Coordinator::Service::unix_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Coordinator::Service::record_view(const membership::Decisions& decisions) {
  const auto change = status_.record(decisions, *membership_, unix_ms());
  return !change || journal_view(*decisions.new_view, *change);
}

}  // namespace tributary::coordinator
