// Holds docs/fault-tolerance.md to the code: its "Defaults" table must list every default
// below with the code's value (and unit), so a changed default fails here until the doc
// changes with it.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "agent/worker.h"
#include "algorithms/agreement.h"
#include "coordinator/coordinator.h"
#include "membership/straggler_policy.h"

namespace tributary::testing {
namespace {

struct Default {
  double value = 0;
  bool milliseconds = false;  // a duration, written "N ms" in the doc
};

template <typename Rep, typename Period>
Default ms(std::chrono::duration<Rep, Period> d) {
  return {static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()),
          true};
}
Default number(double v) { return {v, false}; }

std::map<std::string, Default> code_defaults() {
  const agent::WorkerConfig w;
  const coordinator::CoordinatorConfig c;
  const membership::StragglerConfig s;
  return {
      {"WorkerConfig::deadline_floor", ms(w.deadline_floor)},
      {"WorkerConfig::deadline_slack", number(w.deadline_slack)},
      {"WorkerConfig::collective_timeout", ms(w.collective_timeout)},
      {"WorkerConfig::recovery_timeout", ms(w.recovery_timeout)},
      {"WorkerConfig::join_timeout", ms(w.join_timeout)},
      {"WorkerConfig::min_world_size", number(w.min_world_size)},
      {"WorkerConfig::agreement", number(w.agreement ? 1 : 0)},
      {"WorkerConfig::speculative_max_bytes", number(static_cast<double>(w.speculative_max_bytes))},
      {"kDirectAgreementMax", number(algorithms::kDirectAgreementMax)},
      {"CoordinatorConfig::heartbeat_interval", ms(c.heartbeat_interval)},
      {"CoordinatorConfig::heartbeat_timeout", ms(c.heartbeat_timeout)},
      {"CoordinatorConfig::confirm_silence", ms(c.confirm_silence)},
      {"CoordinatorConfig::max_heartbeat_rate", number(c.max_heartbeat_rate)},
      {"CoordinatorConfig::ready_timeout", ms(c.ready_timeout)},
      {"CoordinatorConfig::boundary_timeout", ms(c.boundary_timeout)},
      {"CoordinatorConfig::resume_timeout", ms(c.resume_timeout)},
      {"CoordinatorConfig::lease_ttl", ms(c.lease_ttl)},
      {"StragglerConfig::k", number(s.k)},
      {"StragglerConfig::floor_seconds", number(s.floor_seconds)},
      {"StragglerConfig::m", number(static_cast<double>(s.m))},
      {"StragglerConfig::w", number(static_cast<double>(s.w))},
      {"StragglerConfig::cooldown", ms(s.cooldown)},
      {"StragglerConfig::min_world_size", number(static_cast<double>(s.min_world_size))},
  };
}

std::string read_doc(const std::string& relative) {
  std::ifstream in(std::string(TRIBUTARY_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Docs, FaultToleranceDefaultsTableMatchesTheCode) {
  const std::string doc = read_doc("docs/fault-tolerance.md");
  ASSERT_FALSE(doc.empty()) << "cannot read docs/fault-tolerance.md under " << TRIBUTARY_SOURCE_DIR;
  const std::map<std::string, Default> want = code_defaults();
  // | `Name::field` | 5000 ms | ...
  const std::regex row(R"(\n\| `([A-Za-z_:]+)` \| ([0-9.]+)( ms)?)");
  std::map<std::string, Default> rows;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator();
       ++it) {
    const std::string name = (*it)[1];
    EXPECT_TRUE(want.contains(name))
        << "the doc lists " << name << ", which this test does not know";
    rows[name] = {std::stod((*it)[2]), (*it)[3].matched};
  }
  for (const auto& [name, d] : want) {
    auto it = rows.find(name);
    if (it == rows.end()) {
      ADD_FAILURE() << "docs/fault-tolerance.md has no row for " << name;
      continue;
    }
    EXPECT_DOUBLE_EQ(it->second.value, d.value) << name;
    EXPECT_EQ(it->second.milliseconds, d.milliseconds) << name << ": unit";
  }
}

}  // namespace
}  // namespace tributary::testing
