// A pure Membership with `n` members in view 1, all Ready and Go'd, on a FakeClock: the
// starting point of the membership tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "membership/membership.h"

namespace tributary::membership::testing {

inline MemberLabels labels(const std::string& name) {
  return {name, "h-" + name, "z", "127.0.0.1:9000", {"tcp"}};
}

inline MembershipConfig config(std::size_t initial) {
  MembershipConfig c;
  c.initial_world_size = initial;
  c.heartbeat_timeout = std::chrono::milliseconds(1000);
  c.confirm_silence = std::chrono::milliseconds(300);
  c.ready_timeout = std::chrono::milliseconds(2000);
  c.boundary_timeout = std::chrono::milliseconds(2000);
  c.resume_timeout = std::chrono::milliseconds(3000);
  c.straggler.enabled = false;
  return c;
}

// A membership with `n` members in view 1, all Ready, Go sent.
struct Cluster {
  explicit Cluster(std::size_t n, MembershipConfig c = config(0)) : m(fix(c, n)) {
    for (std::size_t i = 0; i < n; ++i) {
      std::string name = "m";
      name += std::to_string(i);
      ids.push_back(m.join(labels(name), clock.now())->id);
    }
    EXPECT_EQ(m.epoch(), 1u);
    EXPECT_TRUE(all_ready({}).go);
  }
  static MembershipConfig fix(MembershipConfig c, std::size_t n) {
    if (c.initial_world_size == 0) c.initial_world_size = n;
    return c;
  }
  // Every member of the current view sends Ready with `report` (epoch filled in).
  Decisions all_ready(ReadyReport report) {
    report.epoch = m.epoch();
    Decisions d;
    for (const auto& member : m.view().members) d = m.ready(member.id, report, clock.now());
    return d;
  }
  void heartbeat_all_but(MemberId silent) {
    for (const auto& [id, p] : m.peers()) {
      if (id != silent) m.heartbeat(id, m.epoch(), 0, clock.now());
    }
  }
  FakeClock clock;
  Membership m;
  std::vector<MemberId> ids;
};

}  // namespace tributary::membership::testing
