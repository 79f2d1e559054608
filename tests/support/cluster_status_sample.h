// One ClusterStatus with every field set (a member in the view, a suspect, a pending
// joiner, links inferred and reported, omitted members, a journaled and a live view
// change), shared by the tests of its wire form and of its printing.
#pragma once

#include <string>

#include "membership/cluster_status.h"

namespace tributary::testing_support {

inline membership::MemberStatus sample_member(membership::MemberId id, std::string name,
                                              std::string state, bool in_view, std::uint32_t rank) {
  membership::MemberStatus m;
  m.id = id;
  m.name = std::move(name);
  m.host = "vm";
  m.zone = id == 2 ? "eu" : "";
  m.data_address = "127.0.0.1:4000";
  m.data_address += std::to_string(id);
  m.state = std::move(state);
  m.in_view = in_view;
  m.rank = rank;
  m.known_epoch = 3;
  m.step = 120;
  m.heartbeat_age_ms = 40;
  return m;
}

inline membership::ClusterStatus sample_cluster_status() {
  membership::ClusterStatus s;
  s.instance_id = 0x3e42be9dd61558;
  s.unix_ms = 1'795'424'338'925;  // 2026-11-23T08:58:58.925Z
  s.uptime_ms = 7347;
  s.phase = "steady";
  s.epoch = 3;
  s.world_size = 2;
  s.heartbeat_interval_ms = 100;
  s.heartbeat_timeout_ms = 1000;
  s.suspect_after_ms = 300;
  s.straggler_k = 2;
  s.straggler_m = 3;
  s.straggler_window = 5;
  membership::MemberStatus a = sample_member(1, "w1", "in_view", true, 0);
  a.timed_steps = 7;
  a.step_seconds = 0.0489;
  a.compute_seconds = 0.0219;
  a.collective_seconds = 0.027;
  a.straggler_score = 1.11;
  a.links = {{2, "tcp", "127.0.0.1:40002", "view"}};
  membership::MemberStatus b = sample_member(2, "w2", "suspect", true, 1);
  b.heartbeat_age_ms = 450;
  b.straggling_steps = 1;
  b.links = {{1, "tcp-standby", "10.82.0.1:40001", "agent", {"tcp", "tcp-standby"}, 1,
              "tcp -> tcp-standby (stall)"}};
  s.members = {a, b, sample_member(5, "w5", "pending", false, 0)};
  s.members_omitted = 2;
  s.links_scope = "all_peers";
  s.handshakes_open = 1;
  s.history = {
      {1,
       "initial",
       1'795'424'330'000,
       3,
       {{1, "w1", "", ""}, {2, "w2", "", ""}, {3, "w3", "", ""}},
       {},
       0,
       true},
      {2,
       "failure",
       1'795'424'335'500,
       2,
       {},
       {{3, "w3", "heartbeat_timeout", ""}, {4, "w4", "failure_confirmed", "w1"}},
       3,
       false}};
  return s;
}

}  // namespace tributary::testing_support
