// The agent's half of the challenge-response that admits it to a cluster: a join (a new
// member) or a resume (a member re-admitted under its id after a coordinator restart).
// One implementation for both; they differ only in the proof's MAC domain and in the
// member id the coordinator's proof must name (control/join_auth.h).
//
//   agent -> JoinRequest | ResumeRequest{member_id, labels}
//   coord -> Challenge{server nonce}                        answer()
//   agent -> JoinProof{client nonce, mac}
//   coord -> JoinAccepted{member_id, coordinator_mac}       verify()
//            | JoinRejected{kind, reason}                   rejection()
//
// The secret never travels, and the agent accepts only a coordinator that proves it knows
// the secret too. Pure: no sockets, no clock; a fresh client nonce per challenge. Status
// messages name no endpoint: the caller prefixes "coordinator <endpoint> ".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "control/control.pb.h"
#include "core/auth.h"
#include "core/status.h"
#include "membership/view.h"

namespace tributary::control_client {

class Handshake {
 public:
  // A join as `name`.
  static Handshake join(std::string secret, std::string name);
  // A resume of member `id`, named `name` as when it joined.
  static Handshake resume(std::string secret, std::string name, membership::MemberId id);

  // The first message: a JoinRequest, or a ResumeRequest wrapping it.
  control::Envelope request(const control::JoinRequest& labels) const;
  // The JoinProof answering `challenge`: a new challenge restarts the exchange with a
  // fresh client nonce; the same challenge again gets the same proof. kBadFrame when the
  // nonce is malformed.
  Result<control::Envelope> answer(const control::Challenge& challenge);
  // ok when `accepted` proves the coordinator knows the secret for the member id it
  // names (a resume: for the resumed id). kBadFrame when no challenge came first;
  // kAuthFailed otherwise.
  Status verify(const control::JoinAccepted& accepted) const;
  // What a JoinRejected means: kAuthFailed (wrong secret), kInvalidArgument (a label the
  // coordinator refuses), kUnavailable otherwise (cool-down, full: retry later).
  Status rejection(const control::JoinRejected& rejected) const;

  bool resuming() const { return resume_id_ != 0; }

 private:
  Handshake(std::string secret, std::string name, membership::MemberId resume_id)
      : secret_(std::move(secret)), name_(std::move(name)), resume_id_(resume_id) {}
  std::string_view what() const { return resuming() ? "resume" : "join"; }

  std::string secret_;
  std::string name_;
  membership::MemberId resume_id_ = 0;  // 0: a join
  std::optional<Nonce> server_nonce_;
  Nonce client_nonce_{};
};

}  // namespace tributary::control_client
