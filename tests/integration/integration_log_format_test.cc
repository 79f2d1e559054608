// `--log-format json` as a log shipper meets it: a real coordinator admits two agents,
// rejects a third with the wrong secret, sees them train and leave, and stops on SIGTERM;
// every line it wrote to stderr parses as one JSON object (protobuf's JSON parser, not a
// regex) with the fields core/log.h promises: time, level, component, msg, and epoch once
// a view exists (the coordinator's lines carry its current view's epoch, and no member).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "tests/integration/process.h"

namespace tributary::integration {
namespace {

constexpr char kSecret[] = "log-format-secret";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(LogFormat, EveryCoordinatorLineIsAJsonRecord) {
  TempDir dir;
  CoordinatorProcess c(dir, "coordinator", kSecret, 2, {"--log-format", "json"});
  ASSERT_FALSE(c.wait_ready(deadline_after(seconds(30))).empty()) << c.process->dump();
  const std::vector<std::string> soak = {"--workload",   "soak", "--soak-steps", "5",
                                         "--soak-count", "64",   "--log-format", "json"};
  Process a(dir, "a", agent_argv(c.endpoint(), kSecret, soak));
  Process b(dir, "b", agent_argv(c.endpoint(), kSecret, soak));
  Process intruder(dir, "intruder", agent_argv(c.endpoint(), "not the secret", soak));
  for (Process* p : {&a, &b, &intruder}) {
    ASSERT_TRUE(p->wait_until(deadline_after(seconds(60))).has_value()) << p->dump();
  }
  EXPECT_EQ(a.poll(), 0) << a.dump();
  EXPECT_EQ(b.poll(), 0) << b.dump();
  EXPECT_NE(intruder.poll(), 0) << intruder.dump();
  c.process->signal(SIGTERM);
  ASSERT_EQ(c.process->wait_until(deadline_after(seconds(30))), 0) << c.process->dump();

  const std::regex iso_time(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  const std::set<std::string> levels = {"debug", "info", "warn", "error"};
  const std::regex view_line(R"(^view epoch (\d+) )");
  std::set<std::string> seen_levels;
  int views = 0;
  const auto lines = lines_of(c.process->err());
  ASSERT_GE(lines.size(), 5u) << c.process->dump();
  for (const std::string& line : lines) {
    google::protobuf::Struct record;
    const auto parsed = google::protobuf::util::JsonStringToMessage(line, &record);
    ASSERT_TRUE(parsed.ok()) << "not JSON: " << line << "\n" << parsed.ToString();
    const auto& f = record.fields();
    ASSERT_TRUE(f.contains("time") && f.contains("level") && f.contains("component") &&
                f.contains("msg"))
        << line;
    EXPECT_TRUE(std::regex_match(f.at("time").string_value(), iso_time)) << line;
    EXPECT_TRUE(levels.contains(f.at("level").string_value())) << line;
    seen_levels.insert(f.at("level").string_value());
    EXPECT_EQ(f.at("component").string_value(), "coordinator") << line;
    EXPECT_FALSE(f.contains("member")) << "the coordinator is nobody's member: " << line;
    const std::string& msg = f.at("msg").string_value();
    std::smatch m;
    if (std::regex_search(msg, m, view_line)) {
      ++views;
      ASSERT_TRUE(f.contains("epoch")) << line;
      EXPECT_EQ(f.at("epoch").number_value(), std::stod(m[1])) << "a view's line carries its epoch";
    }
  }
  EXPECT_GE(views, 2) << "the initial view and the views of the leaves";
  EXPECT_TRUE(seen_levels.contains("info") && seen_levels.contains("warn"))
      << "joins are info, the wrong secret a warning\n"
      << c.process->dump();
}

}  // namespace
}  // namespace tributary::integration
