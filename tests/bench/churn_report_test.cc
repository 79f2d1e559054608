// The churn report's tables as bench/plots/tables.py reads them: the header rows it finds
// them by, one row per fault kind with "min / median / p99", and every fault's own times
// ("-" where a time was not seen). tests/bench/plots_test.py parses the same rows.
#include "bench/churn_report.h"

#include <gtest/gtest.h>

namespace tributary::bench {
namespace {

TEST(ChurnReport, WritesTheTablesThePlotReads) {
  Options o;
  o.duration_s = 10;
  o.seed = 1;
  PhaseResult r;
  r.name = "churn";
  r.seconds = 10;
  r.committed = 100;
  r.faults.push_back({"kill", {}, 3, "agent1", 0.2, 0.3, {}});
  r.faults.push_back({"stop", {}, 4, "agent2", 0.9, std::nullopt, {}});
  r.faults.push_back({"join", {}, 5, "agent5", 0.1, 0.4, {}});
  r.faults.push_back({"drain", {}, 6, "agent3", 0.01, 0.08, {}});
  r.faults.push_back({"coordinator", {}, 0, "coordinator", 0.03, std::nullopt, {7}});
  o.control_faults = true;
  const std::string md = churn_report(o, {r});
  for (const char* row : {
           "| phase | fault | n | time-to-detect | time-to-recover |\n",
           "| churn | kill -9 | 1/1 | 0.200 / 0.200 / 0.200 | 0.300 / 0.300 / 0.300 |\n",
           "| churn | SIGSTOP | 0/1 | 0.900 / 0.900 / 0.900 | - |\n",
           "| phase | fault | time-to-detect (s) | time-to-recover (s) |\n",
           "| churn | kill -9 | 0.200 | 0.300 |\n",
           "| churn | SIGSTOP | 0.900 | - |\n",
           "| churn | join (admitted / first step) | 0.100 | 0.400 |\n",
           "| churn | drain (SIGTERM: left / first step without it) | 0.010 | 0.080 |\n",
           "| churn | coordinator kill -9 (listening again / all resumed) | 0.030 | - |\n",
           "drains (SIGTERM), coordinator kill -9 and restart",
       }) {
    EXPECT_NE(md.find(row), std::string::npos) << "missing row: " << row << "in:\n" << md;
  }
}

}  // namespace
}  // namespace tributary::bench
