// The agent's half of the join / resume challenge-response, without sockets: the proof
// binds what it must, and only a coordinator that knows the secret (and, for a resume,
// names the resumed member) is accepted.
#include "control_client/handshake.h"

#include <gtest/gtest.h>

#include "control/codec.h"
#include "control/join_auth.h"

namespace tributary::control_client {
namespace {

constexpr char kSecret[] = "s3cret";

control::Challenge challenge(const Nonce& server) {
  control::Challenge c;
  c.set_nonce(control::to_bytes(server));
  return c;
}

// The coordinator's side of the exchange: its JoinAccepted for `id` after `proof`.
control::JoinAccepted accept(std::string_view secret, const Nonce& server,
                             const control::Envelope& proof, membership::MemberId id) {
  const Nonce client = *control::nonce_from_bytes(proof.join_proof().client_nonce());
  control::JoinAccepted a;
  a.set_member_id(id);
  a.set_coordinator_mac(
      control::to_bytes(control::coordinator_proof_mac(secret, server, client, id)));
  return a;
}

TEST(Handshake, JoinProofBindsTheNameAndTheCoordinatorMustProveTheSecret) {
  Handshake h = Handshake::join(kSecret, "w0");
  EXPECT_FALSE(h.resuming());
  control::JoinRequest labels;
  labels.set_name("w0");
  EXPECT_TRUE(h.request(labels).has_join_request());

  const Nonce server = random_nonce();
  auto proof = h.answer(challenge(server));
  ASSERT_TRUE(proof.is_ok()) << proof.status().to_string();
  const Nonce client = *control::nonce_from_bytes(proof->join_proof().client_nonce());
  EXPECT_EQ(proof->join_proof().mac(),
            control::to_bytes(control::join_proof_mac(kSecret, server, client, "w0")));

  EXPECT_TRUE(h.verify(accept(kSecret, server, *proof, 4)).is_ok());
  EXPECT_EQ(h.verify(accept("other secret", server, *proof, 4)).code(), StatusCode::kAuthFailed);
  control::JoinAccepted no_mac;
  no_mac.set_member_id(4);
  EXPECT_EQ(h.verify(no_mac).code(), StatusCode::kAuthFailed);
}

TEST(Handshake, ResumeProofBindsTheMemberIdAndOnlyThatIdIsAccepted) {
  Handshake h = Handshake::resume(kSecret, "w0", 9);
  EXPECT_TRUE(h.resuming());
  control::JoinRequest labels;
  labels.set_name("w0");
  const control::Envelope request = h.request(labels);
  ASSERT_TRUE(request.has_resume_request());
  EXPECT_EQ(request.resume_request().member_id(), 9u);
  EXPECT_EQ(request.resume_request().join().name(), "w0");

  const Nonce server = random_nonce();
  auto proof = h.answer(challenge(server));
  ASSERT_TRUE(proof.is_ok());
  const Nonce client = *control::nonce_from_bytes(proof->join_proof().client_nonce());
  EXPECT_EQ(proof->join_proof().mac(),
            control::to_bytes(control::resume_proof_mac(kSecret, server, client, 9, "w0")));
  EXPECT_NE(proof->join_proof().mac(),
            control::to_bytes(control::join_proof_mac(kSecret, server, client, "w0")));

  EXPECT_TRUE(h.verify(accept(kSecret, server, *proof, 9)).is_ok());
  // A correct proof for another member is still not our resume.
  EXPECT_EQ(h.verify(accept(kSecret, server, *proof, 10)).code(), StatusCode::kAuthFailed);
}

TEST(Handshake, AcceptWithoutChallengeAndBadNoncesAreBadFrames) {
  Handshake h = Handshake::join(kSecret, "w0");
  EXPECT_EQ(h.verify(control::JoinAccepted{}).code(), StatusCode::kBadFrame);
  control::Challenge short_nonce;
  short_nonce.set_nonce("too short");
  EXPECT_EQ(h.answer(short_nonce).status().code(), StatusCode::kBadFrame);
  EXPECT_EQ(h.verify(control::JoinAccepted{}).code(), StatusCode::kBadFrame);
}

TEST(Handshake, EachChallengeGetsAFreshClientNonceARepeatedOneTheSameProof) {
  Handshake h = Handshake::join(kSecret, "w0");
  const Nonce server = random_nonce();
  auto first = h.answer(challenge(server));
  auto repeated = h.answer(challenge(server));
  ASSERT_TRUE(first.is_ok() && repeated.is_ok());
  // A request sent twice is answered twice with the same challenge: both answers must be
  // the same proof, or the coordinator's accept of the first would not verify here.
  EXPECT_EQ(first->join_proof().SerializeAsString(), repeated->join_proof().SerializeAsString());
  EXPECT_TRUE(h.verify(accept(kSecret, server, *first, 1)).is_ok());
  const Nonce fresh = random_nonce();
  auto second = h.answer(challenge(fresh));
  ASSERT_TRUE(second.is_ok());
  EXPECT_NE(first->join_proof().client_nonce(), second->join_proof().client_nonce());
  // Only the latest exchange counts.
  EXPECT_EQ(h.verify(accept(kSecret, server, *first, 1)).code(), StatusCode::kAuthFailed);
  EXPECT_TRUE(h.verify(accept(kSecret, fresh, *second, 1)).is_ok());
}

TEST(Handshake, RejectionsMapToWhatTheCallerCanDo) {
  const Handshake join = Handshake::join(kSecret, "w0");
  control::JoinRejected r;
  r.set_reason("wrong cluster secret");
  r.set_kind(control::JoinRejected::AUTH_FAILED);
  EXPECT_EQ(join.rejection(r).code(), StatusCode::kAuthFailed);
  EXPECT_EQ(join.rejection(r).message(), "rejected the join: wrong cluster secret");
  r.set_kind(control::JoinRejected::INVALID_REQUEST);
  EXPECT_EQ(join.rejection(r).code(), StatusCode::kInvalidArgument);
  r.set_kind(control::JoinRejected::COOLDOWN);
  EXPECT_EQ(join.rejection(r).code(), StatusCode::kUnavailable);
  r.set_kind(control::JoinRejected::UNKNOWN_MEMBER);
  EXPECT_EQ(Handshake::resume(kSecret, "w0", 3).rejection(r).message(),
            "rejected the resume: wrong cluster secret");
}

}  // namespace
}  // namespace tributary::control_client
