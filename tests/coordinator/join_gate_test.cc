// The coordinator's handshake bookkeeping, with hand-driven time.
#include "coordinator/join_gate.h"

#include <gtest/gtest.h>

#include "control/join_auth.h"

namespace tributary::coordinator {
namespace {

using std::chrono::milliseconds;

membership::MemberLabels labels(std::string name) { return {std::move(name), "h", "z", "h:1", {}}; }

TEST(JoinGate, RightProofAdmitsOnceAndCoordinatorProofMatches) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 8, 8);
  auto nonce = gate.challenge("id-1", "10.0.0.1", labels("w0"), clock.now());
  ASSERT_TRUE(nonce.is_ok());
  const Nonce client = random_nonce();
  const Mac mac = control::join_proof_mac("secret", *nonce, client, "w0");
  auto admitted = gate.verify("id-1", client, mac, clock.now());
  ASSERT_TRUE(admitted.is_ok()) << admitted.status().to_string();
  EXPECT_EQ(admitted->labels.name, "w0");
  EXPECT_TRUE(macs_equal(gate.coordinator_proof(*admitted, 5),
                         control::coordinator_proof_mac("secret", *nonce, client, 5)));
  EXPECT_EQ(gate.verify("id-1", client, mac, clock.now()).status().code(),
            StatusCode::kInvalidArgument)
      << "a challenge answers one proof only";
}

TEST(JoinGate, WrongSecretIsAuthFailedAndConsumesTheChallenge) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 8, 8);
  auto nonce = gate.challenge("id-1", "10.0.0.1", labels("w0"), clock.now());
  const Nonce client = random_nonce();
  auto r = gate.verify("id-1", client, control::join_proof_mac("guess", *nonce, client, "w0"),
                       clock.now());
  EXPECT_EQ(r.status().code(), StatusCode::kAuthFailed);
  EXPECT_EQ(gate.pending(), 0u);
}

TEST(JoinGate, ProofForAnotherNameOrConnectionFails) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 8, 8);
  auto nonce = gate.challenge("id-1", "10.0.0.1", labels("w0"), clock.now());
  const Nonce client = random_nonce();
  EXPECT_EQ(gate.verify("id-2", client, control::join_proof_mac("secret", *nonce, client, "w0"),
                        clock.now())
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gate.verify("id-1", client, control::join_proof_mac("secret", *nonce, client, "w1"),
                        clock.now())
                .status()
                .code(),
            StatusCode::kAuthFailed);
}

TEST(JoinGate, ChallengesExpire) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 8, 8);
  auto nonce = gate.challenge("id-1", "10.0.0.1", labels("w0"), clock.now());
  clock.advance(milliseconds(500));
  const Nonce client = random_nonce();
  EXPECT_EQ(gate.verify("id-1", client, control::join_proof_mac("secret", *nonce, client, "w0"),
                        clock.now())
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(gate.challenge("id-2", "10.0.0.1", labels("w1"), clock.now()).is_ok());
  clock.advance(milliseconds(501));
  gate.expire(clock.now());
  EXPECT_EQ(gate.pending(), 0u);
}

TEST(JoinGate, PendingHandshakesAreBounded) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 2, 2);
  EXPECT_TRUE(gate.challenge("a", "10.0.0.1", labels("a"), clock.now()).is_ok());
  EXPECT_TRUE(gate.challenge("b", "10.0.0.1", labels("b"), clock.now()).is_ok());
  EXPECT_EQ(gate.challenge("c", "10.0.0.1", labels("c"), clock.now()).status().code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(gate.challenge("a", "10.0.0.1", labels("a"), clock.now()).is_ok())
      << "a retry reuses its slot";
  clock.advance(milliseconds(600));
  EXPECT_TRUE(gate.challenge("c", "10.0.0.1", labels("c"), clock.now()).is_ok())
      << "expired slots free up";
}

TEST(JoinGate, OneSourceCannotTakeEverySlot) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 100, 3);
  for (const char* id : {"a", "b", "c"})
    EXPECT_TRUE(gate.challenge(id, "10.0.0.66", labels(id), clock.now()).is_ok());
  auto refused = gate.challenge("d", "10.0.0.66", labels("d"), clock.now());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("from 10.0.0.66"), std::string::npos)
      << refused.status().to_string();
  EXPECT_EQ(gate.pending_from("10.0.0.66"), 3u);
  ASSERT_TRUE(gate.challenge("honest", "10.0.0.7", labels("honest"), clock.now()).is_ok())
      << "another source still gets a slot";
  // A finished handshake (right or wrong) and an expired one free their source's slot.
  const Nonce client = random_nonce();
  (void)gate.verify("a", client, Mac{}, clock.now());
  gate.forget("b");
  EXPECT_EQ(gate.pending_from("10.0.0.66"), 1u);
  clock.advance(milliseconds(500));
  gate.expire(clock.now());
  EXPECT_EQ(gate.pending_from("10.0.0.66"), 0u);
  EXPECT_EQ(gate.pending(), 0u);
}

TEST(JoinGate, ARepeatedRequestGetsTheSameChallengeSoEitherAnswerVerifies) {
  FakeClock clock;
  JoinGate gate("secret", milliseconds(500), 8, 8);
  auto first = gate.challenge("id-1", "10.0.0.1", labels("w0"), clock.now());
  auto again = gate.challenge("id-1", "10.0.0.1", labels("w0"), clock.now());
  ASSERT_TRUE(first.is_ok() && again.is_ok());
  EXPECT_EQ(*first, *again);
  const Nonce client = random_nonce();
  EXPECT_TRUE(gate.verify("id-1", client, control::join_proof_mac("secret", *first, client, "w0"),
                          clock.now())
                  .is_ok());
  // A request for another identity (a resume instead of a join) restarts the challenge.
  auto join = gate.challenge("id-2", "10.0.0.1", labels("w1"), clock.now());
  auto resume = gate.challenge("id-2", "10.0.0.1", labels("w1"), clock.now(), 7);
  ASSERT_TRUE(join.is_ok() && resume.is_ok());
  EXPECT_NE(*join, *resume);
  EXPECT_EQ(gate.pending_from("10.0.0.1"), 1u);
}

}  // namespace
}  // namespace tributary::coordinator
