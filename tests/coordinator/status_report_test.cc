// The status builder (coordinator/status_report.h) over the pure membership, driven by a
// FakeClock: every state `tributary status` shows (forming, changing, steady, a suspect,
// a removal, a pending joiner, a restored history), the timings and straggler score, the
// links, and the bounds. No sockets.
#include "coordinator/status_report.h"

#include <gtest/gtest.h>

namespace tributary::coordinator {
namespace {

using membership::ClusterStatus;
using membership::Decisions;
using membership::MemberId;
using membership::Membership;
using membership::MembershipConfig;
using membership::MemberStatus;
using std::chrono::milliseconds;

constexpr std::int64_t kUnixStart = 1'795'000'000'000;

// Appending instead of "w" + std::to_string(i) sidesteps GCC 12's false -Wrestrict.
std::string named(std::string prefix, const std::string& suffix) {
  prefix += suffix;
  return prefix;
}

// A membership and its tracker, with every decision recorded as the coordinator does.
class Cluster {
 public:
  explicit Cluster(std::size_t world, std::size_t max_members = 4096, bool serve_jobs = false)
      : m_(config(world, max_members, serve_jobs)) {}

  MemberId join(const std::string& name) {
    auto r = m_.join({name,
                      named("host-", name),
                      "z1",
                      named("10.0.0.1:", std::to_string(7000 + next_port_++)),
                      {"tcp"}},
                     clock.now());
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    record(r->decisions);
    return r->id;
  }
  void record(const Decisions& d) { tracker.record(d, m_, unix_ms()); }
  // Every member of the view confirms it: Go, the view is started.
  void ready_all() {
    for (const auto& vm : m_.view().members)
      record(m_.ready(vm.id, {m_.epoch(), started_, 0, 0}, clock.now()));
    started_ = m_.epoch();
  }
  void heartbeat(MemberId id, std::uint64_t step) {
    (void)m_.heartbeat(id, m_.epoch(), step, clock.now());
  }
  std::int64_t unix_ms() const {
    return kUnixStart +
           std::chrono::duration_cast<milliseconds>(clock.now().time_since_epoch()).count();
  }
  ClusterStatus status() const {
    StatusContext ctx;
    ctx.instance_id = 0xabcdef;
    ctx.now = clock.now();
    ctx.unix_ms = unix_ms();
    ctx.heartbeat_interval = milliseconds(100);
    ctx.suspect_after = milliseconds(300);
    ctx.handshakes_open = 1;
    return build_status(m_, tracker, ctx);
  }
  Membership& membership() { return m_; }

  FakeClock clock;
  StatusTracker tracker;

 private:
  static MembershipConfig config(std::size_t world, std::size_t max_members, bool serve_jobs) {
    MembershipConfig c;
    c.initial_world_size = world;
    c.max_members = max_members;
    c.heartbeat_timeout = milliseconds(1000);
    c.reform_when_empty = serve_jobs;
    return c;
  }
  Membership m_;
  int next_port_ = 0;
  membership::Epoch started_ = 0;
};

const MemberStatus* find(const ClusterStatus& s, MemberId id) {
  for (const auto& m : s.members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

TEST(StatusReport, FormingListsTheWaitingJoinersAndNoView) {
  Cluster c(3);
  const MemberId a = c.join("a");
  c.clock.advance(milliseconds(40));
  const MemberId b = c.join("b");
  c.clock.advance(milliseconds(10));
  const ClusterStatus s = c.status();
  EXPECT_EQ(s.phase, "forming");
  EXPECT_EQ(s.epoch, 0u);
  EXPECT_EQ(s.world_size, 3u);
  EXPECT_EQ(s.heartbeat_timeout_ms, 1000);
  EXPECT_EQ(s.suspect_after_ms, 300);
  EXPECT_EQ(s.handshakes_open, 1u);
  EXPECT_EQ(s.instance_id, 0xabcdefu);
  ASSERT_EQ(s.members.size(), 2u);
  EXPECT_EQ(s.members[0].id, a);
  EXPECT_EQ(s.members[0].state, "waiting");
  EXPECT_FALSE(s.members[0].in_view);
  EXPECT_EQ(s.members[0].heartbeat_age_ms, 50);
  EXPECT_EQ(s.members[1].id, b);
  EXPECT_EQ(s.members[1].heartbeat_age_ms, 10);
  EXPECT_EQ(s.members[1].name, "b");
  EXPECT_EQ(s.members[1].host, "host-b");
  EXPECT_TRUE(s.members[1].links.empty());
  EXPECT_TRUE(s.history.empty());
}

TEST(StatusReport, AnEmptiedWorldIsEmptyOrFormingAgainWithServeJobs) {
  for (bool serve_jobs : {false, true}) {
    Cluster c(2, 4096, serve_jobs);
    const MemberId a = c.join("a");
    const MemberId b = c.join("b");
    c.ready_all();
    EXPECT_EQ(c.status().phase, "steady");
    c.record(c.membership().leave(a, c.clock.now()));
    c.record(c.membership().leave(b, c.clock.now()));
    const ClusterStatus s = c.status();
    EXPECT_EQ(s.phase, serve_jobs ? "forming" : "empty") << "serve_jobs " << serve_jobs;
    EXPECT_EQ(s.epoch, 3u);
    EXPECT_EQ(s.world_size, 2u);
  }
}

TEST(StatusReport, TheInitialViewIsChangingUntilEveryoneIsReadyThenSteady) {
  Cluster c(3);
  const MemberId a = c.join("a");
  c.join("b");
  c.join("c");
  ClusterStatus s = c.status();
  EXPECT_EQ(s.phase, "changing");
  EXPECT_EQ(s.epoch, 1u);
  ASSERT_EQ(s.history.size(), 1u);
  EXPECT_EQ(s.history[0].cause, "initial");
  EXPECT_EQ(s.history[0].size, 3u);
  EXPECT_EQ(s.history[0].unix_ms, kUnixStart);
  ASSERT_EQ(s.history[0].joined.size(), 3u);
  EXPECT_EQ(s.history[0].joined[0].name, "a");
  EXPECT_TRUE(s.history[0].removed.empty());
  c.ready_all();
  s = c.status();
  EXPECT_EQ(s.phase, "steady");
  ASSERT_EQ(s.members.size(), 3u);
  for (std::uint32_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(s.members[r].in_view);
    EXPECT_EQ(s.members[r].rank, r);
    EXPECT_EQ(s.members[r].state, "in_view");
  }
  // Links: every peer, TCP to its data address, inferred from the view.
  EXPECT_EQ(s.links_scope, "all_peers");
  const MemberStatus* ma = find(s, a);
  ASSERT_NE(ma, nullptr);
  ASSERT_EQ(ma->links.size(), 2u);
  for (const auto& l : ma->links) {
    EXPECT_NE(l.peer, a);
    EXPECT_EQ(l.transport, "tcp");
    EXPECT_EQ(l.source, "view");
    EXPECT_EQ(l.address, find(s, l.peer)->data_address);
  }
}

// What a member reports of its links (heartbeats: LinkReport) replaces what the view
// implies, for the view it was reported in; an earlier view's report, or a peer outside
// the view, is never shown; a removed member's report is forgotten.
TEST(StatusReport, ReportedLinksReplaceTheInferredOnesForTheirView) {
  Cluster c(3);
  const MemberId a = c.join("a");
  const MemberId b = c.join("b");
  const MemberId d = c.join("c");
  c.ready_all();
  const membership::Epoch epoch = c.membership().epoch();
  c.tracker.links_reported(
      a, epoch,
      {{b, "tcp-standby", "10.82.0.2:5000", "whatever", {"tcp", "tcp-standby"}, 1,
        "tcp -> tcp-standby (error)"},
       {999, "tcp", "10.0.0.9:1", "agent", {}, 0, ""}});
  ClusterStatus s = c.status();
  const MemberStatus* ma = find(s, a);
  ASSERT_NE(ma, nullptr);
  ASSERT_EQ(ma->links.size(), 2u);
  for (const auto& l : ma->links) {
    if (l.peer == b) {
      EXPECT_EQ(l.transport, "tcp-standby");
      EXPECT_EQ(l.source, "agent");  // whatever the member called it
      EXPECT_EQ(l.paths, (std::vector<std::string>{"tcp", "tcp-standby"}));
      EXPECT_EQ(l.moves, 1u);
      EXPECT_EQ(l.last_move, "tcp -> tcp-standby (error)");
    } else {
      EXPECT_EQ(l.peer, d);  // not 999: not in the view
      EXPECT_EQ(l.source, "view");
    }
  }
  // A late report of an earlier view changes nothing.
  c.tracker.links_reported(a, epoch - 1, {});
  EXPECT_EQ(find(c.status(), a)->links, ma->links);
  // A new view (c fell silent and was removed): inferred again until the member reports
  // for it; the removed member's report is forgotten.
  c.tracker.links_reported(d, epoch, {});
  c.clock.advance(milliseconds(1500));
  c.heartbeat(a, 1);
  c.heartbeat(b, 1);
  c.record(c.membership().tick(c.clock.now()));
  s = c.status();
  ASSERT_GT(c.membership().epoch(), epoch);
  ma = find(s, a);
  ASSERT_NE(ma, nullptr);
  for (const auto& l : ma->links) EXPECT_EQ(l.source, "view");
  ASSERT_NE(c.tracker.links(a), nullptr);
  EXPECT_EQ(c.tracker.links(d), nullptr);
}

TEST(StatusReport, TimingsAndStragglerScoreComeFromTheRecentStepReports) {
  Cluster c(3);
  const MemberId a = c.join("a"), b = c.join("b"), slow = c.join("slow");
  c.ready_all();
  const std::int64_t t0 = 1'000'000'000'000'000'000;
  for (std::uint64_t step = 1; step <= 12; ++step) {
    const std::int64_t at = t0 + static_cast<std::int64_t>(step) * 50'000'000;  // every 50 ms
    c.tracker.step_reported(a, step, 0.020, at);
    c.tracker.step_reported(b, step, 0.010, at);
    if (step < 12) c.tracker.step_reported(slow, step, 0.045, at);  // step 12 incomplete
  }
  const ClusterStatus s = c.status();
  const MemberStatus* ma = find(s, a);
  ASSERT_NE(ma, nullptr);
  EXPECT_EQ(ma->timed_steps, StatusTracker::kTimedSteps - 1);
  EXPECT_NEAR(ma->step_seconds, 0.050, 1e-9);
  EXPECT_NEAR(ma->compute_seconds, 0.020, 1e-9);
  EXPECT_NEAR(ma->collective_seconds, 0.030, 1e-9);
  // Step 11 is the latest every member reported: lower median of {10, 20, 45} ms is 20.
  EXPECT_NEAR(ma->straggler_score, 1.0, 1e-9);
  EXPECT_NEAR(find(s, b)->straggler_score, 0.5, 1e-9);
  EXPECT_NEAR(find(s, slow)->straggler_score, 2.25, 1e-9);
  EXPECT_EQ(s.straggler_window, 5u);
  EXPECT_EQ(s.straggler_m, 3u);
}

TEST(StatusReport, AStoppedMemberIsSuspectedThenRemovedWithItsReason) {
  Cluster c(3);
  const MemberId a = c.join("a"), b = c.join("b"), stopped = c.join("stopped");
  c.ready_all();
  for (int i = 0; i < 4; ++i) {  // 400 ms: a and b heartbeat, `stopped` is silent
    c.clock.advance(milliseconds(100));
    c.heartbeat(a, 10);
    c.heartbeat(b, 10);
  }
  ClusterStatus s = c.status();
  EXPECT_EQ(find(s, a)->state, "in_view");
  EXPECT_EQ(find(s, stopped)->state, "suspect");
  EXPECT_EQ(find(s, stopped)->heartbeat_age_ms, 400);
  EXPECT_EQ(find(s, a)->step, 10u);
  // Still a suspect, older, until the heartbeat timeout removes it.
  c.clock.advance(milliseconds(500));
  c.heartbeat(a, 11);
  c.heartbeat(b, 11);
  EXPECT_EQ(find(c.status(), stopped)->heartbeat_age_ms, 900);
  c.clock.advance(milliseconds(200));
  c.record(c.membership().tick(c.clock.now()));
  s = c.status();
  EXPECT_EQ(find(s, stopped), nullptr);
  EXPECT_EQ(s.epoch, 2u);
  ASSERT_EQ(s.history.size(), 2u);
  const auto& change = s.history.back();
  EXPECT_EQ(change.epoch, 2u);
  EXPECT_EQ(change.cause, "failure");
  EXPECT_EQ(change.size, 2u);
  EXPECT_EQ(change.unix_ms, c.unix_ms());
  EXPECT_TRUE(change.joined.empty());
  ASSERT_EQ(change.removed.size(), 1u);
  EXPECT_EQ(change.removed[0].id, stopped);
  EXPECT_EQ(change.removed[0].name, "stopped");
  EXPECT_EQ(change.removed[0].reason, "heartbeat_timeout");
}

TEST(StatusReport, AJoinerAfterTheFirstViewIsPendingUntilTheBoundary) {
  Cluster c(2);
  const MemberId a = c.join("a"), b = c.join("b");
  c.ready_all();
  const MemberId late = c.join("late");
  ClusterStatus s = c.status();
  ASSERT_EQ(s.members.size(), 3u);
  EXPECT_EQ(s.members.back().id, late);  // the view by rank first, then the others
  EXPECT_EQ(s.members.back().state, "pending");
  EXPECT_FALSE(s.members.back().in_view);
  for (MemberId id : {a, b})
    c.record(c.membership().boundary(id, c.membership().epoch(), false, c.clock.now()));
  s = c.status();
  EXPECT_EQ(find(s, late)->state, "in_view");
  ASSERT_EQ(s.history.size(), 2u);
  EXPECT_EQ(s.history.back().cause, "boundary");
  ASSERT_EQ(s.history.back().joined.size(), 1u);
  EXPECT_EQ(s.history.back().joined[0].name, "late");
}

TEST(StatusReport, ARestoredHistoryComesFromTheJournalAndResumingMembersShow) {
  Cluster c(2);
  auto entry = [](membership::Epoch epoch, std::vector<MemberId> ids, std::string cause) {
    membership::JournalEntry e;
    e.epoch = epoch;
    e.cause = std::move(cause);
    e.unix_ms = kUnixStart - 1000 + static_cast<std::int64_t>(epoch);
    for (MemberId id : ids)
      e.members.push_back({id, {named("w", std::to_string(id)), "h", "", "h:1", {}}});
    return e;
  };
  std::vector<membership::JournalEntry> views = {
      entry(1, {1, 2, 3}, "initial"), entry(2, {1, 2}, "failure"), entry(3, {1, 2, 4}, "boundary")};
  views[1].removed.push_back({3, "w3", "heartbeat_timeout", {}});
  c.tracker.restore(views);
  c.membership().restore({{1, {"w1", "h", "", "h:1", {}}}, {2, {"w2", "h", "", "h:1", {}}}},
                         c.clock.now());
  ClusterStatus s = c.status();
  EXPECT_EQ(s.phase, "resuming");
  ASSERT_EQ(s.members.size(), 2u);
  EXPECT_EQ(s.members[0].state, "resuming");
  ASSERT_EQ(s.history.size(), 3u);
  for (const auto& h : s.history) EXPECT_TRUE(h.from_journal);
  EXPECT_EQ(s.history[0].joined.size(), 3u);  // the initial view: everyone joined
  EXPECT_TRUE(s.history[1].joined.empty());
  ASSERT_EQ(s.history[1].removed.size(), 1u);
  EXPECT_EQ(s.history[1].removed[0].reason, "heartbeat_timeout");
  ASSERT_EQ(s.history[2].joined.size(), 1u);
  EXPECT_EQ(s.history[2].joined[0].id, 4u);
  EXPECT_EQ(s.history[2].unix_ms, kUnixStart - 997);
}

TEST(StatusReport, ListsAreBoundedWhateverTheClusterSize) {
  const std::size_t n = membership::kMaxStatusMembers + 6;
  Cluster c(n);
  for (std::size_t i = 0; i < n; ++i) c.join(named("m", std::to_string(i)));
  const ClusterStatus s = c.status();
  EXPECT_EQ(s.members.size(), membership::kMaxStatusMembers);
  EXPECT_EQ(s.members_omitted, 6u);
  EXPECT_EQ(s.links_scope, "ring_neighbours");
  // Ring neighbours only: rank r links to r - 1 and r + 1 (mod n).
  ASSERT_EQ(s.members[0].links.size(), 2u);
  EXPECT_EQ(s.members[5].links[0].peer, s.members[4].id);
  EXPECT_EQ(s.members[5].links[1].peer, s.members[6].id);
  ASSERT_EQ(s.history.size(), 1u);
  EXPECT_EQ(s.history[0].joined.size(), membership::kMaxChangeMembers);
  EXPECT_EQ(s.history[0].omitted, n - membership::kMaxChangeMembers);
  // The history keeps the last kMaxStatusHistory changes.
  StatusTracker t;
  std::vector<membership::JournalEntry> many(membership::kMaxStatusHistory + 5);
  for (std::size_t i = 0; i < many.size(); ++i) many[i].epoch = i + 1;
  t.restore(many);
  ASSERT_EQ(t.history().size(), membership::kMaxStatusHistory);
  EXPECT_EQ(t.history().front().epoch, 6u);
}

}  // namespace
}  // namespace tributary::coordinator
