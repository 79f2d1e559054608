#include "control_client/handshake.h"

#include "control/codec.h"
#include "control/join_auth.h"

namespace tributary::control_client {

Handshake Handshake::join(std::string secret, std::string name) {
  return Handshake(std::move(secret), std::move(name), 0);
}

Handshake Handshake::resume(std::string secret, std::string name, membership::MemberId id) {
  return Handshake(std::move(secret), std::move(name), id);
}

control::Envelope Handshake::request(const control::JoinRequest& labels) const {
  control::Envelope env;
  if (resuming()) {
    *env.mutable_resume_request()->mutable_join() = labels;
    env.mutable_resume_request()->set_member_id(resume_id_);
  } else {
    *env.mutable_join_request() = labels;
  }
  return env;
}

Result<control::Envelope> Handshake::answer(const control::Challenge& challenge) {
  TRIB_ASSIGN_OR_RETURN(const Nonce server_nonce, control::nonce_from_bytes(challenge.nonce()));
  // The same challenge again (our request was repeated): the same proof, so that the
  // coordinator's answer to either copy verifies.
  if (server_nonce_ != server_nonce) client_nonce_ = random_nonce();
  server_nonce_ = server_nonce;
  const Mac mac = resuming() ? control::resume_proof_mac(secret_, server_nonce, client_nonce_,
                                                         resume_id_, name_)
                             : control::join_proof_mac(secret_, server_nonce, client_nonce_, name_);
  control::Envelope proof;
  proof.mutable_join_proof()->set_client_nonce(control::to_bytes(client_nonce_));
  proof.mutable_join_proof()->set_mac(control::to_bytes(mac));
  return proof;
}

Status Handshake::verify(const control::JoinAccepted& accepted) const {
  if (!server_nonce_) {
    return error(StatusCode::kBadFrame,
                 "accepted a " + std::string(what()) + " it never challenged");
  }
  if (resuming() && accepted.member_id() != resume_id_) {
    return error(StatusCode::kAuthFailed,
                 "accepted member " + std::to_string(accepted.member_id()) +
                     " for our resume of member " + std::to_string(resume_id_));
  }
  auto theirs = control::mac_from_bytes(accepted.coordinator_mac());
  if (!theirs ||
      !macs_equal(*theirs, control::coordinator_proof_mac(secret_, *server_nonce_, client_nonce_,
                                                          accepted.member_id()))) {
    return error(StatusCode::kAuthFailed,
                 "could not prove the cluster secret (its secret differs from ours, or it is "
                 "not our coordinator)");
  }
  return Status::ok();
}

Status Handshake::rejection(const control::JoinRejected& rejected) const {
  const std::string what = "rejected the " + std::string(this->what()) + ": " + rejected.reason();
  switch (rejected.kind()) {
    case control::JoinRejected::AUTH_FAILED: return error(StatusCode::kAuthFailed, what);
    case control::JoinRejected::INVALID_REQUEST: return error(StatusCode::kInvalidArgument, what);
    // COOLDOWN (evicted as a straggler lately), FULL, ...: retry later.
    default: return error(StatusCode::kUnavailable, what);
  }
}

}  // namespace tributary::control_client
