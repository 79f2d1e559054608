// How `tributary status` prints (cli/status_format.h): the table, golden; the JSON parsed
// back; text from the network escaped in both.
#include "cli/status_format.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "tests/support/cluster_status_sample.h"

namespace tributary::cli {
namespace {

using membership::ClusterStatus;
using membership::MemberStatus;
using testing_support::sample_cluster_status;

TEST(StatusFormat, TableGolden) {
  const std::string expected =
      "coordinator tcp://127.0.0.1:7070  instance 003e42be9dd61558  up 7.3 s\n"
      "epoch 3  steady  2 in view, 1 suspect, 1 waiting to join (world size 2)\n"
      "heartbeats every 100 ms; suspect after 300 ms of silence, removed after 1000 ms; "
      "stragglers: compute above 2.0 x median in 3 of 5 steps\n"
      "\n"
      "members:\n"
      "  RANK  ID  NAME  HOST  ZONE  STATE    HEARTBEAT  STEP  STEP MS  COMPUTE MS  "
      "COLLECTIVE MS  STRAGGLER\n"
      "  0     1   w1    vm    -     in_view  40 ms      120   48.9     21.9        27.0           "
      "1.11 (0/5)\n"
      "  1     2   w2    vm    eu    suspect  450 ms     120   -        -           -              "
      "- (1/5)\n"
      "  ... and 2 more (not listed)\n"
      "\n"
      "links (every peer; source view: inferred from the view, agent: reported):\n"
      "  1 w1 -> 2 tcp 127.0.0.1:40002 (view)\n"
      "  2 w2 -> 1 tcp-standby 10.82.0.1:40001 (agent; paths tcp>tcp-standby; 1 move, last tcp -> "
      "tcp-standby (stall))\n"
      "\n"
      "joiners waiting:\n"
      "  ID  NAME  HOST  ZONE  STATE    HEARTBEAT  DATA\n"
      "  5   w5    vm    -     pending  40 ms      127.0.0.1:40005\n"
      "  1 join handshakes in progress\n"
      "\n"
      "recent view changes (oldest first; * from the journal of an earlier process):\n"
      "  EPOCH  WHEN (UTC)     AGO    CAUSE    SIZE  CHANGES\n"
      "  1*     08:58:50.000Z  8.9 s  initial  3     +1 w1, +2 w2, +3 w3\n"
      "  2      08:58:55.500Z  3.4 s  failure  2     -3 w3 (heartbeat_timeout), "
      "-4 w4 (failure_confirmed, reported by w1), 3 more\n";
  EXPECT_EQ(format_status_table(sample_cluster_status(), "tcp://127.0.0.1:7070"), expected);
}

TEST(StatusFormat, EmptySectionsSayNone) {
  ClusterStatus s;
  s.phase = "forming";
  s.world_size = 3;
  s.links_scope = "all_peers";
  const std::string table = format_status_table(s, "tcp://c:1");
  EXPECT_NE(table.find("epoch 0  forming  0 in view (world size 3)"), std::string::npos) << table;
  EXPECT_NE(table.find("members:\n  (none)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("joiners waiting:\n  (none)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("(oldest first; * from the journal of an earlier process):\n  (none)\n"),
            std::string::npos)
      << table;
}

google::protobuf::Struct parse(const std::string& json) {
  google::protobuf::Struct out;
  const auto st = google::protobuf::util::JsonStringToMessage(json, &out);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << json;
  return out;
}

TEST(StatusFormat, JsonParsesBackWithMembersAndJoinersApart) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "google.protobuf.Struct is unusable in a TSan build against a non-TSan "
                  "libprotobuf";
#endif
  const std::string json = format_status_json(sample_cluster_status(), "tcp://127.0.0.1:7070");
  ASSERT_EQ(json.back(), '\n');
  EXPECT_EQ(json.find('\n'), json.size() - 1) << "one line";
  const auto root = parse(json);
  const auto& f = root.fields();
  EXPECT_EQ(f.at("coordinator").string_value(), "tcp://127.0.0.1:7070");
  EXPECT_EQ(f.at("instance_id").string_value(), "003e42be9dd61558");
  EXPECT_EQ(f.at("phase").string_value(), "steady");
  EXPECT_EQ(f.at("epoch").number_value(), 3);
  EXPECT_EQ(f.at("straggler").struct_value().fields().at("k").number_value(), 2);
  const auto& members = f.at("members").list_value().values();
  ASSERT_EQ(members.size(), 2);
  const auto& w2 = members[1].struct_value().fields();
  EXPECT_EQ(w2.at("name").string_value(), "w2");
  EXPECT_EQ(w2.at("state").string_value(), "suspect");
  EXPECT_EQ(w2.at("rank").number_value(), 1);
  EXPECT_EQ(w2.at("heartbeat_age_ms").number_value(), 450);
  const auto& link = w2.at("links").list_value().values(0).struct_value().fields();
  EXPECT_EQ(link.at("peer").number_value(), 1);
  EXPECT_EQ(link.at("transport").string_value(), "tcp-standby");
  EXPECT_EQ(link.at("source").string_value(), "agent");
  ASSERT_EQ(link.at("paths").list_value().values_size(), 2);
  EXPECT_EQ(link.at("paths").list_value().values(1).string_value(), "tcp-standby");
  EXPECT_EQ(link.at("moves").number_value(), 1);
  EXPECT_EQ(link.at("last_move").string_value(), "tcp -> tcp-standby (stall)");
  EXPECT_NEAR(members[0].struct_value().fields().at("step_seconds").number_value(), 0.0489, 1e-12);
  const auto& joiners = f.at("joiners").list_value().values();
  ASSERT_EQ(joiners.size(), 1);
  EXPECT_EQ(joiners[0].struct_value().fields().at("state").string_value(), "pending");
  EXPECT_TRUE(joiners[0].struct_value().fields().at("rank").has_null_value());
  const auto& history = f.at("history").list_value().values();
  ASSERT_EQ(history.size(), 2);
  const auto& failure = history[1].struct_value().fields();
  EXPECT_EQ(failure.at("cause").string_value(), "failure");
  EXPECT_FALSE(failure.at("from_journal").bool_value());
  EXPECT_EQ(failure.at("removed")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("reason")
                .string_value(),
            "heartbeat_timeout");
  const auto& confirmed = failure.at("removed").list_value().values(1).struct_value().fields();
  EXPECT_EQ(confirmed.at("noticed_by").string_value(), "w1");
}

// A member named to forge output: a newline, a quote, a backslash, control bytes.
TEST(StatusFormat, HostileNamesAreEscapedInBothFormats) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "google.protobuf.Struct is unusable in a TSan build against a non-TSan "
                  "libprotobuf";
#endif
  ClusterStatus s = sample_cluster_status();
  const std::string evil = "x\n  9   forged  \"q\" \\ \x01\x7f end";
  s.members[0].name = evil;
  s.history[1].removed[0].reason = evil;
  s.history[1].removed[1].noticed_by = "w1\n  9   forged";
  const std::string table = format_status_table(s, "tcp://c:1");
  EXPECT_NE(table.find("reported by w1\\n  9   forged"), std::string::npos) << table;
  EXPECT_EQ(table.find("\n  9   forged"), std::string::npos) << table;
  EXPECT_NE(table.find("x\\n  9   forged"), std::string::npos) << table;
  const auto root = parse(format_status_json(s, "tcp://c:1"));
  EXPECT_EQ(root.fields()
                .at("members")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("name")
                .string_value(),
            evil);
}

}  // namespace
}  // namespace tributary::cli
