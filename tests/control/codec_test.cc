// Decoder bounds: garbage, unknown messages and inconsistent views are kBadFrame, never
// a crash or an out-of-bounds read. Join handshake MACs bind every input.
#include "control/codec.h"
#include "membership/cluster_status.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/hash.h"

#include "control/join_auth.h"

namespace tributary::control {
namespace {

membership::View sample_view() {
  membership::View v;
  v.epoch = 7;
  v.members = {{11, 0, "a:1", "a", "z", {"tcp"}}, {12, 1, "b:2", "b", "z", {}}};
  v.ring = {0, 1};
  return v;
}

TEST(ControlCodec, RoundTripsAView) {
  control::Envelope env;
  view_to_proto(sample_view(), env.mutable_view());
  auto decoded = decode_envelope(encode_envelope(env));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  auto view = view_from_proto(decoded->view());
  ASSERT_TRUE(view.is_ok()) << view.status().to_string();
  EXPECT_EQ(*view, sample_view());
}

membership::ViewDelta sample_delta() {
  membership::View next = sample_view();
  next.epoch = 8;
  next.members[1] = {13, 1, "c:3", "c", "y", {"tcp", "shm"}};
  return *membership::make_delta(sample_view(), next);
}

TEST(ControlCodec, RoundTripsAViewDeltaThatRebuildsTheView) {
  control::Envelope env;
  view_delta_to_proto(sample_delta(), env.mutable_view_delta());
  auto decoded = decode_envelope(encode_envelope(env));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(body_name(decoded->body_case()), "view_delta");
  auto delta = view_delta_from_proto(decoded->view_delta());
  ASSERT_TRUE(delta.is_ok()) << delta.status().to_string();
  EXPECT_EQ(*delta, sample_delta());
  auto view = membership::apply_delta(sample_view(), *delta);
  ASSERT_TRUE(view.is_ok()) << view.status().to_string();
  EXPECT_EQ(view->epoch, 8u);
  EXPECT_EQ(view->members[1].capabilities, (std::vector<std::string>{"tcp", "shm"}));
}

// View::leaves_only travels with a full view and with a delta.
TEST(ControlCodec, LeavesOnlyRoundTripsInViewsAndDeltas) {
  membership::View base = sample_view();
  membership::View next = base;
  next.epoch = base.epoch + 1;
  next.members.pop_back();
  next.ring.pop_back();
  next.leaves_only = true;
  control::Envelope env;
  view_to_proto(next, env.mutable_view());
  auto view = view_from_proto(decode_envelope(encode_envelope(env))->view());
  ASSERT_TRUE(view.is_ok()) << view.status().to_string();
  EXPECT_TRUE(view->leaves_only);
  auto delta = membership::make_delta(base, next);
  ASSERT_TRUE(delta);
  control::Envelope d;
  view_delta_to_proto(*delta, d.mutable_view_delta());
  auto decoded = view_delta_from_proto(decode_envelope(encode_envelope(d))->view_delta());
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  auto rebuilt = membership::apply_delta(base, *decoded);
  ASSERT_TRUE(rebuilt.is_ok()) << rebuilt.status().to_string();
  EXPECT_EQ(*rebuilt, next);
  EXPECT_TRUE(rebuilt->leaves_only);
}

TEST(ControlCodec, MalformedViewDeltasAreBadFrame) {
  auto refused = [](auto mutate, std::string_view why) {
    control::Envelope env;
    view_delta_to_proto(sample_delta(), env.mutable_view_delta());
    mutate(*env.mutable_view_delta());
    auto decoded = decode_envelope(encode_envelope(env));
    Status st = decoded.status();
    if (decoded) st = view_delta_from_proto(decoded->view_delta()).status();
    EXPECT_EQ(st.code(), StatusCode::kBadFrame) << why;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  refused([](ViewDelta& d) { d.set_base_epoch(0); }, "base_epoch");
  refused([](ViewDelta& d) { d.set_epoch(d.base_epoch()); }, "not above");
  refused([](ViewDelta& d) { d.set_size(1u << 20); }, "members");
  refused([](ViewDelta& d) { d.add_removed(0); }, "removed id 0");
  refused([](ViewDelta& d) { *d.add_added() = d.added(0); }, "duplicate added id");
  refused([](ViewDelta& d) { d.mutable_added(0)->set_rank(5); }, "ranks");
  refused([](ViewDelta& d) { d.mutable_added(0)->set_host(std::string(300, 'h')); }, "300 bytes");
  refused([](ViewDelta& d) { d.mutable_added(0)->set_zone("z\n"); }, "control character");
  refused([](ViewDelta& d) { d.mutable_added(0)->set_id(0); }, "zero");
  // Millions of removed ids in one message: refused by the size bound before any work.
  control::Envelope huge;
  view_delta_to_proto(sample_delta(), huge.mutable_view_delta());
  for (int i = 0; i < 70000; ++i) huge.mutable_view_delta()->add_removed(1000 + i);
  auto r = decode_envelope(encode_envelope(huge));
  EXPECT_EQ(r.status().code(), StatusCode::kBadFrame);
  EXPECT_NE(r.status().message().find("members"), std::string::npos) << r.status().message();
}

TEST(ControlCodec, GarbageIsBadFrame) {
  for (std::string bytes : {std::string("\xff\xff\xff\xff garbage", 13), std::string("\x0a\x7f", 2),
                            std::string(1000, '\xee')}) {
    auto r = decode_envelope(bytes);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kBadFrame);
  }
}

TEST(ControlCodec, EmptyAndUnknownBodiesAreBadFrame) {
  EXPECT_EQ(decode_envelope("").status().code(), StatusCode::kBadFrame);
  // Field 99, length-delimited, 2 bytes: a message type from a future version.
  const std::string unknown("\x9a\x06\x02hi", 5);
  auto r = decode_envelope(unknown);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no message this version knows"), std::string::npos);
}

TEST(ControlCodec, OversizedIsBadFrameBeforeParsing) {
  auto r = decode_envelope(std::string(2048, '\0'), 1024);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("exceeds 1024"), std::string::npos);
}

TEST(ControlCodec, InconsistentViewsAreBadFrame) {
  auto bad = [](auto mutate) {
    control::View pv;
    view_to_proto(sample_view(), &pv);
    mutate(pv);
    return view_from_proto(pv).status().code();
  };
  EXPECT_EQ(bad([](control::View& v) { v.mutable_members(1)->set_rank(5); }),
            StatusCode::kBadFrame);
  EXPECT_EQ(bad([](control::View& v) { v.mutable_members(1)->set_id(11); }), StatusCode::kBadFrame);
  EXPECT_EQ(bad([](control::View& v) { v.mutable_members(0)->set_id(0); }), StatusCode::kBadFrame);
  EXPECT_EQ(bad([](control::View& v) { v.set_ring(1, 0); }), StatusCode::kBadFrame);
  EXPECT_EQ(bad([](control::View& v) { v.add_ring(1); }), StatusCode::kBadFrame);
  EXPECT_EQ(bad([](control::View& v) { v.set_ring(0, 9); }), StatusCode::kBadFrame);
  // A permutation, but not rank order: no agent would run it (membership/view.h).
  EXPECT_EQ(bad([](control::View& v) {
              v.set_ring(0, 1);
              v.set_ring(1, 0);
            }),
            StatusCode::kBadFrame);
  EXPECT_EQ(bad([](control::View& v) { v.mutable_members(0)->set_host(std::string(300, 'h')); }),
            StatusCode::kBadFrame);
}

TEST(ControlCodec, JoinRequestValidationNamesTheField) {
  auto request = [] {
    control::JoinRequest r;
    r.set_protocol_version(kProtocolVersion);
    r.set_name("w0");
    r.set_host("h");
    r.set_data_address("10.0.0.1:7000");
    return r;
  };
  EXPECT_TRUE(validate_join_request(request()).is_ok());
  auto message = [&](auto mutate) {
    control::JoinRequest r = request();
    mutate(r);
    Status st = validate_join_request(r);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    return st.message();
  };
  EXPECT_NE(message([](auto& r) { r.set_host(""); }).find("host"), std::string::npos);
  EXPECT_NE(message([](auto& r) { r.set_data_address("nohost"); }).find("host:port"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.set_data_address("h:99999"); }).find("port"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.set_data_address("h:12x"); }).find("port"), std::string::npos);
  EXPECT_NE(message([](auto& r) { r.set_zone(std::string(257, 'z')); }).find("zone"),
            std::string::npos);
  EXPECT_NE(message([](auto& r) { r.set_protocol_version(9); }).find("protocol"),
            std::string::npos);
  control::JoinRequest many = request();
  for (int i = 0; i < 40; ++i) many.mutable_capabilities()->Add()->assign(1, 'c');
  EXPECT_EQ(validate_join_request(many).code(), StatusCode::kInvalidArgument);
  control::JoinRequest v6 = request();
  v6.set_data_address("[::1]:7000");
  EXPECT_TRUE(validate_join_request(v6).is_ok());
  // A name that would start a new log line (or hide text from a terminal) is refused.
  for (const char* evil : {"w0\n2026-11-23T05:40:36.123Z info tributary[coordinator]: forged",
                           "w0\r", "\x1b[2Jw0", "w0\x7f"}) {
    EXPECT_NE(message([&](auto& r) { r.set_name(evil); }).find("name holds a control character"),
              std::string::npos)
        << evil;
  }
  EXPECT_NE(message([](auto& r) { r.set_host("h\t1"); }).find("host"), std::string::npos);
}

TEST(ControlCodec, FixedSizeFieldsMustHaveTheirSize) {
  EXPECT_TRUE(nonce_from_bytes(std::string(16, 'n')).is_ok());
  EXPECT_EQ(nonce_from_bytes(std::string(15, 'n')).status().code(), StatusCode::kBadFrame);
  EXPECT_TRUE(mac_from_bytes(std::string(32, 'm')).is_ok());
  EXPECT_EQ(mac_from_bytes("").status().code(), StatusCode::kBadFrame);
}

TEST(JoinAuth, ProofsBindEveryInputAndDifferByDirection) {
  const Nonce s = random_nonce();
  const Nonce c = random_nonce();
  const Mac base = join_proof_mac("secret", s, c, "w0");
  EXPECT_TRUE(macs_equal(base, join_proof_mac("secret", s, c, "w0")));
  EXPECT_FALSE(macs_equal(base, join_proof_mac("secreT", s, c, "w0")));
  EXPECT_FALSE(macs_equal(base, join_proof_mac("secret", c, s, "w0")));
  EXPECT_FALSE(macs_equal(base, join_proof_mac("secret", s, c, "w1")));
  const Mac coord = coordinator_proof_mac("secret", s, c, 1);
  EXPECT_FALSE(macs_equal(base, coord));
  EXPECT_FALSE(macs_equal(coord, coordinator_proof_mac("secret", s, c, 2)));
}

// The fault-tolerance messages: out-of-bounds fields are kBadFrame naming the field.
TEST(ControlCodec, FaultToleranceMessagesAreBoundsChecked) {
  auto decode = [](const control::Envelope& e) { return decode_envelope(encode_envelope(e)); };
  control::Envelope ok;
  auto* r = ok.mutable_ready();
  r->set_member_id(1);
  r->set_epoch(5);
  r->set_previous_epoch(4);
  r->set_committed_seq(9);
  EXPECT_TRUE(decode(ok).is_ok());
  r->set_previous_epoch(5);
  auto bad = decode(ok);
  EXPECT_EQ(bad.status().code(), StatusCode::kBadFrame);
  EXPECT_NE(bad.status().message().find("previous_epoch"), std::string::npos)
      << bad.status().to_string();
  r->set_previous_epoch(4);
  for (std::uint64_t seq : {membership::kSeqLimit, ~std::uint64_t{0}}) {
    r->set_committed_seq(seq);
    EXPECT_EQ(decode(ok).status().code(), StatusCode::kBadFrame) << seq;
    r->set_committed_seq(9);
    r->set_held_seq(seq);
    EXPECT_EQ(decode(ok).status().code(), StatusCode::kBadFrame) << seq;
    r->set_held_seq(0);
  }

  control::Envelope timing;
  timing.mutable_step_timing()->set_compute_seconds(0.25);
  EXPECT_TRUE(decode(timing).is_ok());
  for (double v : {-1.0, 1e9, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity()}) {
    timing.mutable_step_timing()->set_compute_seconds(v);
    EXPECT_EQ(decode(timing).status().code(), StatusCode::kBadFrame) << v;
  }

  control::Envelope go;
  go.mutable_go()->set_epoch(3);
  go.mutable_go()->add_joiners(4);
  EXPECT_TRUE(decode(go).is_ok());
  go.mutable_go()->add_joiners(0);
  EXPECT_EQ(decode(go).status().code(), StatusCode::kBadFrame);
  go.mutable_go()->clear_joiners();
  go.mutable_go()->set_commit_through(~std::uint64_t{0});
  EXPECT_EQ(decode(go).status().code(), StatusCode::kBadFrame);

  control::Envelope report;
  report.mutable_failure_report()->set_epoch(2);
  report.mutable_failure_report()->set_detail(std::string(kMaxDetailBytes + 1, 'x'));
  EXPECT_EQ(decode(report).status().code(), StatusCode::kBadFrame);
  control::Envelope boundary;
  boundary.mutable_boundary_request()->set_member_id(1);
  EXPECT_EQ(decode(boundary).status().code(), StatusCode::kBadFrame) << "epoch 0";
  control::Envelope resume;
  resume.mutable_resume_request()->set_member_id(3);
  EXPECT_EQ(decode(resume).status().code(), StatusCode::kBadFrame) << "no labels";
  resume.mutable_resume_request()->mutable_join()->set_name("n");
  EXPECT_TRUE(decode(resume).is_ok());
}

// A heartbeat's link report (`tributary status`, source "agent") is bounded like the
// status report's links: at most kMaxFullLinkMembers - 1 links, kMaxLinkPaths path names
// of kMaxPathNameBytes each, labels within kMaxLabelBytes.
TEST(ControlCodec, AHeartbeatsLinkReportIsBoundsChecked) {
  auto decode = [](const control::Envelope& e) { return decode_envelope(encode_envelope(e)); };
  control::Envelope hb;
  hb.mutable_heartbeat()->set_member_id(1);
  hb.mutable_heartbeat()->set_epoch(2);
  EXPECT_TRUE(decode(hb).is_ok()) << "no report";
  auto* report = hb.mutable_heartbeat()->mutable_links();
  report->set_epoch(2);
  auto* l = report->add_links();
  l->set_peer(2);
  l->set_transport("tcp-standby");
  l->set_address("10.82.0.2:4000");
  l->add_paths("tcp");
  l->add_paths("tcp-standby");
  l->set_moves(1);
  l->set_last_move("tcp -> tcp-standby (error)");
  auto decoded = decode(hb);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->heartbeat().links().links(0).paths(1), "tcp-standby");
  auto refused = [&](const std::string& what) {
    auto r = decode(hb);
    EXPECT_EQ(r.status().code(), StatusCode::kBadFrame) << what;
  };
  for (std::size_t k = 2; k <= membership::kMaxLinkPaths; ++k) l->add_paths("tcp");
  refused("too many paths");
  l->clear_paths();
  l->add_paths(std::string(membership::kMaxPathNameBytes + 1, 'p'));
  refused("a long path name");
  l->clear_paths();
  l->set_address(std::string(kMaxLabelBytes + 1, 'a'));
  refused("a long address");
  l->set_address("10.82.0.2:4000");
  EXPECT_TRUE(decode(hb).is_ok());
  for (std::size_t k = 1; k < membership::kMaxFullLinkMembers; ++k) *report->add_links() = *l;
  refused("too many links");
}

// A standby's NotLeader names the leader's endpoint: bounded like a label.
TEST(ControlCodec, NotLeaderRoundTripsAndIsBounded) {
  control::Envelope e;
  e.mutable_not_leader()->set_leader("tcp://127.0.0.1:7070");
  auto back = decode_envelope(encode_envelope(e));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->not_leader().leader(), "tcp://127.0.0.1:7070");
  EXPECT_EQ(body_name(back->body_case()), "not_leader");
  e.mutable_not_leader()->set_leader(std::string(kMaxLabelBytes + 1, 'x'));
  EXPECT_EQ(decode_envelope(encode_envelope(e)).status().code(), StatusCode::kBadFrame);
}

TEST(JoinAuth, ResumeProofBindsTheMemberIdAndDiffersFromAJoinProof) {
  const Nonce s = random_nonce();
  const Nonce c = random_nonce();
  EXPECT_NE(resume_proof_mac("k", s, c, 1, "n"), resume_proof_mac("k", s, c, 2, "n"));
  EXPECT_NE(resume_proof_mac("k", s, c, 1, "n"), resume_proof_mac("k", s, c, 1, "m"));
  EXPECT_NE(resume_proof_mac("k", s, c, 1, "n"), join_proof_mac("k", s, c, "n"));
}

// The MACs are wire contract between agents and coordinators of different builds: their
// layouts (join_auth.h) pinned by value.
TEST(JoinAuth, MacsMatchTheirDocumentedLayouts) {
  Nonce s{};
  Nonce c{};
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i] = static_cast<std::uint8_t>(i);
    c[i] = static_cast<std::uint8_t>(0xf0 + i);
  }
  EXPECT_EQ(to_hex(join_proof_mac("s3cret", s, c, "w0")),
            "e778667c56ff3532ea8512a629a74302e619ff4ce8e56364565a5e2b218b0c42");
  EXPECT_EQ(to_hex(resume_proof_mac("s3cret", s, c, 0x0102030405060708ull, "w0")),
            "b0943896fb9e8e4d47e7f77830e17cc9aab4ad24e191701332971ef808bc83a4");
  EXPECT_EQ(to_hex(coordinator_proof_mac("s3cret", s, c, 42)),
            "ad4f35ec809f496fa2343088a716e0b9db7b43b6e73ce7fb5c63cd6c2c1b1a61");
}

}  // namespace
}  // namespace tributary::control

namespace tributary::control {
namespace {

Envelope round_ready(double weight, std::uint32_t deadline_ms = 1000, std::uint32_t min = 1,
                     std::uint64_t round = 3) {
  Envelope env;
  auto* r = env.mutable_round_ready();
  r->set_member_id(4);
  r->set_epoch(2);
  r->set_round(round);
  r->set_weight(weight);
  r->set_deadline_ms(deadline_ms);
  r->set_min_participants(min);
  return env;
}

TEST(ControlCodec, RoundReadyRoundTrips) {
  auto decoded = decode_envelope(encode_envelope(round_ready(12.5)));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  const membership::RoundReady r = round_ready_from_proto(decoded->round_ready());
  EXPECT_EQ(r.member, 4u);
  EXPECT_EQ(r.epoch, 2u);
  EXPECT_EQ(r.round, 3u);
  EXPECT_EQ(r.weight, 12.5);
  EXPECT_EQ(r.deadline, std::chrono::milliseconds(1000));
  EXPECT_EQ(r.min_participants, 1u);
}

TEST(ControlCodec, MalformedRoundReadyIsRefusedNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double w : {nan, -nan, inf, -inf, 0.0, -1.0, -0.0, 1e16,
                   std::numeric_limits<double>::denorm_min() * -1}) {
    auto decoded = decode_envelope(encode_envelope(round_ready(w)));
    ASSERT_FALSE(decoded.is_ok()) << w;
    EXPECT_EQ(decoded.status().code(), StatusCode::kBadFrame);
    EXPECT_NE(decoded.status().message().find("round_ready: weight"), std::string::npos)
        << decoded.status().message();
  }
  struct Case {
    Envelope env;
    std::string names;
  };
  std::vector<Case> cases = {
      {round_ready(1, 0), "deadline_ms 0"},
      {round_ready(1, 86'400'001), "deadline_ms 86400001"},
      {round_ready(1, 1000, 0), "min_participants 0"},
      {round_ready(1, 1000, 1'000'000), "min_participants 1000000"},
      {round_ready(1, 1000, 1, std::uint64_t{1} << 56), "at or beyond 2^56"},
  };
  Envelope zero_epoch = round_ready(1);
  zero_epoch.mutable_round_ready()->set_epoch(0);
  cases.push_back({zero_epoch, "epoch is 0"});
  Envelope zero_member = round_ready(1);
  zero_member.mutable_round_ready()->set_member_id(0);
  cases.push_back({zero_member, "member_id is 0"});
  for (const auto& c : cases) {
    auto decoded = decode_envelope(encode_envelope(c.env));
    ASSERT_FALSE(decoded.is_ok()) << c.names;
    EXPECT_NE(decoded.status().message().find(c.names), std::string::npos)
        << decoded.status().message();
  }
}

TEST(ControlCodec, RoundDecisionRoundTripsAndIsBounded) {
  membership::RoundDecision d;
  d.epoch = 5;
  d.round = 9;
  d.contributors = {{11, 3.0}, {13, 0.5}};
  d.members = 3;
  d.min_participants = 2;
  Envelope env;
  round_decision_to_proto(d, env.mutable_round_decision());
  auto decoded = decode_envelope(encode_envelope(env));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(round_decision_from_proto(decoded->round_decision()), d);

  auto refused = [](Envelope e, const std::string& names) {
    auto r = decode_envelope(encode_envelope(e));
    ASSERT_FALSE(r.is_ok()) << names;
    EXPECT_NE(r.status().message().find(names), std::string::npos) << r.status().message();
  };
  Envelope dup = env;
  dup.mutable_round_decision()->mutable_contributors(1)->set_member_id(11);
  refused(dup, "duplicate contributor id 11");
  Envelope nan = env;
  nan.mutable_round_decision()->mutable_contributors(0)->set_weight(
      std::numeric_limits<double>::quiet_NaN());
  refused(nan, "contributor 11 has weight");
  Envelope more = env;
  more.mutable_round_decision()->set_members(1);
  refused(more, "2 contributors of 1 members");
  Envelope failed = env;
  failed.mutable_round_decision()->set_failed(true);
  refused(failed, "a failed round with contributors");
  Envelope long_reason = env;
  long_reason.mutable_round_decision()->set_reason(std::string(2000, 'x'));
  refused(long_reason, "reason longer than");
  Envelope done;
  done.mutable_round_done()->set_member_id(1);
  done.mutable_round_done()->set_epoch(0);
  refused(done, "round_done: epoch is 0");
  Envelope commit;
  commit.mutable_round_commit()->set_epoch(1);
  commit.mutable_round_commit()->set_round(~std::uint64_t{0});
  refused(commit, "round_commit: round at or beyond 2^56");
}

}  // namespace
}  // namespace tributary::control
