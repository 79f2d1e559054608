// The status exchange's challenge bookkeeping (coordinator/status_gate.h), hand-driven time.
#include "coordinator/status_gate.h"

#include <gtest/gtest.h>

#include "control/status_codec.h"

namespace tributary::coordinator {
namespace {

using std::chrono::milliseconds;

TEST(StatusGate, RightProofIsVerifiedOnceAndTheReplyMacMatches) {
  FakeClock clock;
  StatusGate gate("secret", milliseconds(500), 4);
  auto nonce = gate.challenge("asker", clock.now());
  ASSERT_TRUE(nonce.is_ok());
  const Nonce client = random_nonce();
  const Mac mac = control::status_request_mac("secret", *nonce, client);
  auto verified = gate.verify("asker", client, mac, clock.now());
  ASSERT_TRUE(verified.is_ok()) << verified.status().to_string();
  EXPECT_EQ(gate.reply_mac(*verified, "report"),
            control::status_reply_mac("secret", *nonce, client, "report"));
  EXPECT_EQ(gate.verify("asker", client, mac, clock.now()).status().code(),
            StatusCode::kInvalidArgument)
      << "a challenge answers one proof only";
}

TEST(StatusGate, WrongSecretIsAuthFailedAndConsumesTheChallenge) {
  FakeClock clock;
  StatusGate gate("secret", milliseconds(500), 4);
  auto nonce = gate.challenge("asker", clock.now());
  const Nonce client = random_nonce();
  EXPECT_EQ(gate.verify("asker", client, control::status_request_mac("guess", *nonce, client),
                        clock.now())
                .status()
                .code(),
            StatusCode::kAuthFailed);
  EXPECT_EQ(gate.open(), 0u);
  // A proof for another connection's challenge does not verify either.
  auto other = gate.challenge("other", clock.now());
  EXPECT_EQ(gate.verify("asker", client, control::status_request_mac("secret", *other, client),
                        clock.now())
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(StatusGate, ChallengesExpireAndAreBounded) {
  FakeClock clock;
  StatusGate gate("secret", milliseconds(500), 2);
  ASSERT_TRUE(gate.challenge("a", clock.now()).is_ok());
  auto b = gate.challenge("b", clock.now());
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(gate.challenge("c", clock.now()).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(gate.challenge("a", clock.now()).is_ok()) << "a repeated request replaces its own";
  clock.advance(milliseconds(500));
  const Nonce client = random_nonce();
  EXPECT_EQ(gate.verify("b", client, control::status_request_mac("secret", *b, client), clock.now())
                .status()
                .code(),
            StatusCode::kInvalidArgument)
      << "a right proof after the challenge expired";
  EXPECT_TRUE(gate.challenge("c", clock.now()).is_ok()) << "expired challenges free their slots";
  EXPECT_EQ(gate.open(), 1u);
}

}  // namespace
}  // namespace tributary::coordinator
