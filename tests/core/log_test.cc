#include "core/log.h"

#include <gtest/gtest.h>

#include <vector>

namespace tributary {
namespace {

LogRecord record(std::string_view message, std::string_view member = "w3",
                 std::uint64_t epoch = 5) {
  LogRecord r;
  r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1795412436123));
  r.level = LogLevel::kWarn;
  r.component = "agent";
  r.member = member;
  r.epoch = epoch;
  r.message = message;
  return r;
}

TEST(Log, TextLineCarriesTimeLevelComponentMemberAndEpoch) {
  EXPECT_EQ(format_log_line(record("peer lost"), LogFormat::kText),
            "2026-11-23T05:40:36.123Z warn tributary[agent] member=w3 epoch=5: peer lost");
  EXPECT_EQ(format_log_line(record("joining", "", 0), LogFormat::kText),
            "2026-11-23T05:40:36.123Z warn tributary[agent]: joining")
      << "unknown member and epoch are left out";
}

TEST(Log, JsonLineHasEveryField) {
  EXPECT_EQ(
      format_log_line(record("peer \"3\" lost"), LogFormat::kJson),
      R"({"time":"2026-11-23T05:40:36.123Z","level":"warn","component":"agent","member":"w3",)"
      R"("epoch":5,"msg":"peer \"3\" lost"})");
}

TEST(Log, TextFromThePeerCannotForgeALine) {
  const std::string evil =
      "x\n2026-11-23T05:40:36.123Z info tributary[coordinator]: member 9 joined\x01\\";
  const std::string text = format_log_line(record(evil, "bad\nname"), LogFormat::kText);
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_NE(text.find("member=bad\\nname"), std::string::npos) << text;
  EXPECT_NE(text.find("joined\\x01\\\\"), std::string::npos) << text;
  const std::string json = format_log_line(record(evil), LogFormat::kJson);
  EXPECT_EQ(json.find('\n'), std::string::npos) << json;
  EXPECT_NE(json.find("joined\\u0001\\\\\"}"), std::string::npos) << json;
}

TEST(Log, LoggersOfOneAgentShareTheirContext) {
  std::vector<std::string> lines;
  Logger worker("agent",
                [&](const LogRecord& r) { lines.push_back(format_log_line(r, LogFormat::kText)); });
  const Logger link = worker.child("link");
  worker.context()->set_member("w1");
  worker.context()->set_epoch(7);
  link.logf(LogLevel::kDebug, "rank %d lost after %.1f s", 2, 1.5);
  ASSERT_EQ(lines.size(), 1u) << "an injected sink sees every level";
  EXPECT_NE(lines[0].find("debug tributary[link] member=w1 epoch=7: rank 2 lost after 1.5 s"),
            std::string::npos)
      << lines[0];
  const std::string long_message(2000, 'x');
  worker.logf(LogLevel::kInfo, "%s", long_message.c_str());
  EXPECT_NE(lines[1].find(long_message), std::string::npos)
      << "messages longer than the stack buffer";
}

TEST(Log, ParsesLevelsAndFormats) {
  EXPECT_EQ(parse_log_level("warn"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("loud"), std::nullopt);
  EXPECT_EQ(parse_log_format("json"), LogFormat::kJson);
  EXPECT_EQ(parse_log_format("xml"), std::nullopt);
}

}  // namespace
}  // namespace tributary
