// The status report's wire form (control/status_codec.h): a round trip, the bounds a
// client enforces on what a coordinator sends, the worst-case size, and the MACs.
#include "control/status_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "control/codec.h"
#include "control/join_auth.h"
#include "tests/support/cluster_status_sample.h"

namespace tributary::control {
namespace {

using testing_support::sample_cluster_status;

TEST(StatusCodec, RoundTripKeepsEveryField) {
  StatusReport p;
  status_to_proto(sample_cluster_status(), &p);
  StatusReport parsed;
  ASSERT_TRUE(parsed.ParseFromString(p.SerializeAsString()));
  auto back = status_from_proto(parsed);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, sample_cluster_status());
}

TEST(StatusCodec, RejectsReportsBeyondTheBounds) {
  // `what` describes the mutation; `field`, what the error must name.
  auto rejects = [](auto&& mutate, const std::string& what, const std::string& field) {
    StatusReport p;
    status_to_proto(sample_cluster_status(), &p);
    mutate(p);
    auto r = status_from_proto(p);
    ASSERT_FALSE(r.is_ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kBadFrame) << what;
    EXPECT_NE(r.status().message().find("status report: " + field), std::string::npos)
        << what << ": " << r.status().message();
  };
  // Each list one entry beyond its bound, whatever the sample holds.
  rejects(
      [](StatusReport& p) {
        p.clear_members();
        for (std::size_t i = 0; i <= membership::kMaxStatusMembers; ++i) p.add_members();
      },
      "too many members", "members:");
  rejects([](StatusReport& p) { p.mutable_members(0)->set_name(std::string(257, 'x')); },
          "a long name", "member label");
  rejects(
      [](StatusReport& p) {
        p.mutable_members(0)->set_step_seconds(std::numeric_limits<double>::quiet_NaN());
      },
      "a NaN time", "step_seconds");
  rejects([](StatusReport& p) { p.mutable_members(0)->set_straggler_score(-1); },
          "a negative score", "straggler_score");
  rejects(
      [](StatusReport& p) {
        p.mutable_members(0)->clear_links();
        for (std::size_t i = 0; i < membership::kMaxFullLinkMembers; ++i)
          p.mutable_members(0)->add_links();
      },
      "too many links of one member", "links of member");
  rejects(
      [](StatusReport& p) {
        auto* l = p.mutable_members(0)->mutable_links(0);
        for (std::size_t i = 0; i <= membership::kMaxLinkPaths; ++i) l->add_paths("tcp");
      },
      "a link with too many paths", "paths of a link");
  rejects([](StatusReport& p) { p.mutable_members(0)->mutable_links(0)->add_paths(std::string(33, 'x')); },
          "a long path name", "link path");
  rejects(
      [](StatusReport& p) {
        p.mutable_members(0)->mutable_links(0)->set_last_move(std::string(97, 'x'));
      },
      "a long last move", "last move");
  rejects(
      [](StatusReport& p) {
        // Members within their bound, each within its own, links in all beyond theirs.
        p.clear_members();
        for (std::size_t i = 0; i < membership::kMaxStatusMembers; ++i) {
          auto* m = p.add_members();
          for (int l = 0; l < 3; ++l) m->add_links();
        }
      },
      "too many links in all", "links:");
  rejects(
      [](StatusReport& p) {
        p.clear_history();
        for (std::size_t i = 0; i <= membership::kMaxStatusHistory; ++i) p.add_history();
      },
      "too long a history", "history");
  rejects(
      [](StatusReport& p) {
        p.mutable_history(0)->clear_removed();
        for (std::size_t i = 0; i <= membership::kMaxChangeMembers; ++i)
          p.mutable_history(0)->add_removed();
      },
      "too many removals in one change", "view change members");
}

// The largest report a coordinator can build (every list full, every label at its
// maximum length; links: ring neighbours, as every member has above kMaxFullLinkMembers)
// fits the reply a client accepts.
TEST(StatusCodec, TheWorstCaseReportFitsTheReplyBound) {
  const std::string big(kMaxLabelBytes, 'x');
  membership::ClusterStatus s = sample_cluster_status();
  s.phase = s.links_scope = big;
  membership::MemberStatus m = s.members[0];
  m.name = m.host = m.zone = m.data_address = m.state = big;
  m.id = m.step = m.known_epoch = std::numeric_limits<std::uint64_t>::max();
  m.links.assign(membership::kMaxStatusLinks / membership::kMaxStatusMembers,
                 {std::numeric_limits<std::uint64_t>::max(), big, big, big,
                  std::vector<std::string>(membership::kMaxLinkPaths,
                                           std::string(membership::kMaxPathNameBytes, 'p')),
                  std::numeric_limits<std::uint32_t>::max(),
                  std::string(membership::kMaxLastMoveBytes, 'l')});
  s.members.assign(membership::kMaxStatusMembers, m);
  membership::ViewChange c = s.history[0];
  c.cause = big;
  c.joined.assign(membership::kMaxChangeMembers,
                  {std::numeric_limits<std::uint64_t>::max(), big, big});
  c.removed = c.joined;
  for (auto& r : c.removed) r.noticed_by = big;
  s.history.assign(membership::kMaxStatusHistory, c);
  StatusReport p;
  status_to_proto(s, &p);
  Envelope env;
  env.mutable_status_reply()->set_report(p.SerializeAsString());
  env.mutable_status_reply()->set_mac(std::string(32, 'm'));
  const std::string bytes = encode_envelope(env);
  EXPECT_LT(bytes.size(), kMaxStatusReplyBytes);
  auto decoded = decode_envelope(bytes, kMaxStatusReplyBytes);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  StatusReport parsed;
  ASSERT_TRUE(parsed.ParseFromString(decoded->status_reply().report()));
  EXPECT_TRUE(status_from_proto(parsed).is_ok());
  std::cout << "worst-case status reply: " << bytes.size() << " bytes (bound "
            << kMaxStatusReplyBytes << ")\n";
}

TEST(StatusCodec, MacsBindTheSecretTheNoncesAndTheReport) {
  const Nonce server = random_nonce(), client = random_nonce();
  const Mac request = status_request_mac("secret", server, client);
  EXPECT_EQ(request, status_request_mac("secret", server, client));
  EXPECT_NE(request, status_request_mac("other", server, client));
  EXPECT_NE(request, status_request_mac("secret", client, server));
  // Never interchangeable with a join proof over the same nonces (an empty name).
  EXPECT_NE(request, join_proof_mac("secret", server, client, ""));
  const Mac reply = status_reply_mac("secret", server, client, "report");
  EXPECT_NE(reply, status_reply_mac("secret", server, client, "Report"));
  EXPECT_NE(reply, status_reply_mac("other", server, client, "report"));
  EXPECT_NE(Mac(status_reply_mac("secret", server, client, "")), request);
}

TEST(StatusCodec, EnvelopesOfTheExchangeDecodeAndDeniedReasonsAreBounded) {
  Envelope denied;
  denied.mutable_status_denied()->set_reason(std::string(kMaxDetailBytes + 1, 'r'));
  EXPECT_FALSE(decode_envelope(encode_envelope(denied)).is_ok());
  denied.mutable_status_denied()->set_reason("wrong cluster secret");
  auto d = decode_envelope(encode_envelope(denied));
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(body_name(d->body_case()), "status_denied");
  Envelope request;
  request.mutable_status_request()->set_protocol_version(kProtocolVersion);
  EXPECT_EQ(body_name(decode_envelope(encode_envelope(request))->body_case()), "status_request");
}

}  // namespace
}  // namespace tributary::control
