// The membership state machine (membership/membership.h) driven by random event
// sequences: joins, resumes, leaves, removals, heartbeats, Ready reports, boundaries,
// failure reports and step timings with arbitrary (often impossible) values, and the
// passage of time. After every event the invariants of membership.h must hold:
//  - views: epochs strictly increase by one; ranks 0..n-1 in order, ring in rank order,
//    ids unique and non-zero, every member of the view known and in phase kInView;
//  - removed members are gone; ids are never reused; at most max_members;
//  - Go: its epoch is the current view's; commit_through is below kSeqLimit and never
//    above what some member of the round reported, or what an earlier Go said;
//  - time: tick() before next_expiry() decides nothing.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <set>

#include "core/check.h"
#include "membership/membership.h"

using namespace tributary;
using namespace tributary::membership;
using std::chrono::milliseconds;

namespace {

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& in)
      : in_(in), restored_(in.ConsumeBool()), m_(config(in, restored_)) {
    if (restored_) {
      // A restarted coordinator with journaled members of epoch kJournaledEpoch.
      std::vector<std::pair<MemberId, MemberLabels>> journaled;
      const int n = in_.ConsumeIntegralInRange(1, 4);
      for (int i = 0; i < n; ++i) journaled.emplace_back(10 + i, labels(i));
      for (const auto& [id, l] : journaled) issued_.insert(id);
      m_.restore(journaled, clock_.now());
      last_epoch_ = kJournaledEpoch;
    }
  }

  void step() {
    const TimePoint now = clock_.now();
    switch (in_.ConsumeIntegralInRange(0, 10)) {
      case 0: {
        auto j = m_.join(labels(in_.ConsumeIntegralInRange(0, 7)), now);
        if (j) {
          TRIB_CHECK(issued_.insert(j->id).second) << "member id " << j->id << " reused";
          check(j->decisions);
        }
        break;
      }
      case 1: {
        auto r = m_.resume(some_id(), labels(in_.ConsumeIntegralInRange(0, 7)), now);
        if (r) check(r->decisions);
        break;
      }
      case 2: check(m_.leave(some_id(), now)); break;
      case 3:
        check(m_.remove(some_id(), static_cast<RemovalReason>(in_.ConsumeIntegralInRange(0, 7)),
                        now));
        break;
      case 4: {
        const auto hb =
            m_.heartbeat(some_id(), epoch_claim(), in_.ConsumeIntegral<std::uint64_t>(), now);
        TRIB_CHECK(hb.current_epoch == m_.epoch()) << "heartbeat ack with another epoch";
        break;
      }
      case 5: ready(now); break;
      case 6: check(m_.boundary(some_id(), epoch_claim(), in_.ConsumeBool(), now)); break;
      case 7: check(m_.failure_report(some_id(), epoch_claim(), some_id(), now)); break;
      case 8:
        check(m_.step_timing(some_id(), in_.ConsumeIntegralInRange<std::uint64_t>(0, 20),
                             in_.ConsumeFloatingPointInRange(0.0, 2.0), now));
        break;
      default: {
        clock_.advance(milliseconds(in_.ConsumeIntegralInRange(0, 1500)));
        const TimePoint later = clock_.now();
        const bool early = later < m_.next_expiry();
        const Decisions d = m_.tick(later);
        TRIB_CHECK(!early || d.removed.empty() && !d.new_view && !d.go)
            << "tick() decided something before next_expiry()";
        check(d);
      }
    }
    check_state();
  }

 private:
  static constexpr Epoch kJournaledEpoch = 5;

  static MembershipConfig config(FuzzedDataProvider& in, bool restored) {
    MembershipConfig c;
    if (restored) {
      c.last_epoch = kJournaledEpoch;
      c.last_member_id = 13;
    }
    c.initial_world_size = in.ConsumeIntegralInRange<std::size_t>(1, 3);
    c.max_members = 6;
    c.heartbeat_timeout = milliseconds(1000);
    c.confirm_silence = milliseconds(300);
    c.ready_timeout = milliseconds(2000);
    c.boundary_timeout = milliseconds(2000);
    c.resume_timeout = milliseconds(3000);
    c.straggler.enabled = in.ConsumeBool();
    c.straggler.m = 2;
    c.straggler.w = 3;
    c.straggler.min_world_size = 1;
    c.straggler.cooldown = milliseconds(5000);
    return c;
  }
  static MemberLabels labels(int i) {
    return {"m" + std::to_string(i), "h" + std::to_string(i % 3), "z", "127.0.0.1:9000", {"tcp"}};
  }
  // Mostly ids that exist, sometimes not.
  MemberId some_id() {
    if (in_.ConsumeIntegralInRange(0, 9) == 0) return in_.ConsumeIntegral<MemberId>();
    return in_.ConsumeIntegralInRange<MemberId>(0, 16);
  }
  Epoch epoch_claim() {
    switch (in_.ConsumeIntegralInRange(0, 5)) {
      case 0: return in_.ConsumeIntegral<Epoch>();
      case 1: return m_.epoch() > 0 ? m_.epoch() - 1 : 0;
      default: return m_.epoch();
    }
  }
  std::uint64_t seq_claim() {
    switch (in_.ConsumeIntegralInRange(0, 4)) {
      case 0: return in_.ConsumeIntegral<std::uint64_t>();
      case 1: return kSeqLimit - 1;
      default: return in_.ConsumeIntegralInRange<std::uint64_t>(0, 12);
    }
  }

  void ready(TimePoint now) {
    const MemberId id = some_id();
    ReadyReport r;
    r.epoch = epoch_claim();
    r.previous_epoch = in_.ConsumeBool() ? m_.started_epoch() : in_.ConsumeIntegral<Epoch>();
    r.committed_seq = seq_claim();
    r.held_seq = in_.ConsumeBool() ? r.committed_seq + 1 : seq_claim();
    if (m_.find(id) && r.epoch == m_.epoch()) {
      // What members of this round reported: the ceiling for its Go.
      if (round_epoch_ != m_.epoch()) {
        round_epoch_ = m_.epoch();
        round_ceiling_ = 0;
      }
      for (std::uint64_t s : {r.committed_seq, r.held_seq})
        if (s < kSeqLimit) round_ceiling_ = std::max(round_ceiling_, s);
    }
    check(m_.ready(id, r, now));
  }

  void check(const Decisions& d) {
    for (const auto& r : d.removed) TRIB_CHECK(!m_.find(r.id)) << "removed member still known";
    if (d.new_view) {
      TRIB_CHECK(d.new_view->epoch == last_epoch_ + 1)
          << "epoch " << d.new_view->epoch << " after " << last_epoch_;
      last_epoch_ = d.new_view->epoch;
      TRIB_CHECK(*d.new_view == m_.view()) << "the decided view is not the current one";
    }
    if (d.go) {
      TRIB_CHECK(d.go->epoch == m_.epoch()) << "Go for another epoch than the view's";
      TRIB_CHECK(d.go->commit_through < kSeqLimit) << "commit_through beyond every seq space";
      const std::uint64_t ceiling =
          std::max(last_go_, round_epoch_ == d.go->epoch ? round_ceiling_ : 0);
      TRIB_CHECK(d.go->commit_through <= ceiling) << "commit_through " << d.go->commit_through
                                                  << " above anything reported (" << ceiling << ")";
      last_go_ = std::max(last_go_, d.go->commit_through);
      for (MemberId r : d.go->recipients) TRIB_CHECK(m_.view().contains(r)) << "Go to a non-member";
    }
  }
  void check_state() {
    const View& v = m_.view();
    std::set<MemberId> ids;
    for (std::size_t i = 0; i < v.members.size(); ++i) {
      const auto& member = v.members[i];
      TRIB_CHECK(member.rank == i && v.ring.at(i) == i) << "ranks or ring out of order";
      TRIB_CHECK(member.id != 0 && ids.insert(member.id).second) << "zero or duplicate id";
      const PeerState* p = m_.find(member.id);
      TRIB_CHECK(p != nullptr && p->phase == PeerPhase::kInView) << "view member not in view";
    }
    TRIB_CHECK(m_.size() <= m_.config().max_members) << "more members than max_members";
    TRIB_CHECK(v.epoch == 0 || v.epoch == last_epoch_) << "view epoch not the last decided";
  }

  FuzzedDataProvider& in_;
  const bool restored_;
  FakeClock clock_;
  Membership m_;
  std::set<MemberId> issued_;
  Epoch last_epoch_ = 0;
  std::uint64_t last_go_ = 0;
  Epoch round_epoch_ = 0;
  std::uint64_t round_ceiling_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  Harness h(in);
  for (int i = 0; i < 256 && in.remaining_bytes() > 0; ++i) h.step();
  return 0;
}
