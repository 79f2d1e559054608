// All-or-nothing at every message boundary: real Workers (ranks as threads) over the
// in-process control plane (control_client/memory_control_plane.h, fake clock) and one
// in-memory fabric per epoch (WorkerEnvironment::connect_links), every rank running the
// same run of consecutive float32 sum all-reduces, one rank killed just before its k-th
// send (counted over the whole run, every epoch), for every k the run has: boundary k's
// victim is rank k % n (the next rank when that one makes k sends or fewer), so every
// boundary is tested once, at every world size, for both sizes and both kinds of death.
//
// A death: the coordinator stops hearing from the victim (silence: no heartbeat, Ready or
// report of its gets through), then its links of the current fabric go down, one of two
// ways (Death): kKill, MemoryFabric::kill: peers see kPeerLost, its own operations fail, and
// what it sent that nobody consumed yet is lost with it (how much is a matter of timing);
// kCut, its links to every peer break after what it sent: exactly its first k messages
// arrive, then peers see kPeerLost. kCut makes the asymmetric ends deterministic (the
// victim's last message of a round reached one survivor and not the next), which kKill
// mostly turns into symmetric ones by dropping the last messages in flight. The
// survivors' reports are confirmed by its silence when the test moves the fake clock past
// confirm_silence, once.
//
// What must hold for every call (docs/fault-tolerance.md, "Sequence numbers and
// outcomes", and the tests the speculative design asks for): every survivor returns ok,
// the same bits, the same Outcome epoch and contributors; the bits are the sum of the
// contributors' inputs; the contributors are all n members (epoch 1: committed before or
// despite the kill) or the n - 1 survivors (a re-run in a later epoch). Message counts are
// never assumed: a run without a kill counts each rank's sends first.
//
// After its calls each survivor runs one barrier, the "next call" of a training loop: a
// member that returned its last all-reduce must still take part in the view change (Ready,
// and the repair step) that frees a survivor still inside it. Its result is not checked
// beyond ok. The no_tail sweeps leave it out: then only the Worker's idle recovery can
// move a member that returned early (docs/fault-tolerance.md, "Members between calls").
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/worker.h"
#include "algorithms/memory_link.h"
#include "algorithms/seq_space.h"
#include "control_client/memory_control_plane.h"
#include "core/log.h"
#include "tests/agent/epoch_fabrics.h"
#include "tests/agent/in_process_world.h"

namespace tributary::agent {
namespace {

using algorithms::MemoryFabric;
using control_client::MemoryCoordinator;

constexpr long kNever = std::numeric_limits<long>::max();

// How the victim's links go down (see the top of the file).
enum class Death { kKill, kCut };
const char* to_string(Death d) { return d == Death::kKill ? "kill" : "cut"; }

// A scenario that has not ended after this (real time) fails instead of hanging.
constexpr auto kScenarioLimit = std::chrono::seconds(30);

// Worker logs (a warning per failed attempt, a line per start) drown the test's own
// output over hundreds of scenarios: errors only, unless KILL_BOUNDARY_LOG=debug|info|warn.
void quiet_logs() {
  LogLevel level = LogLevel::kError;
  if (const char* env = std::getenv("KILL_BOUNDARY_LOG")) {
    if (auto parsed = parse_log_level(env)) level = *parsed;
  }
  configure_logging(level, LogFormat::kText);
}

using Fabrics = in_process::EpochFabrics;

// One Worker's process, seen from its links: its sends counted across every epoch, and
// the send before which it dies.
struct Tap {
  // Set after Worker::start (its links are built during start, before the id is known)
  // and before the thread that makes its calls starts.
  std::atomic<std::uint64_t> member_id{0};
  std::atomic<long> kill_at{kNever};
  std::atomic<Death> death{Death::kKill};
  std::atomic<long> sends{0};
  std::atomic<bool> dead{false};
  // Dies (an exact cut) before its first send of a repair step's broadcast, whenever that
  // comes: the member giving a lacking survivor its copy, or relaying it, dies under it.
  std::atomic<bool> die_in_repair{false};
};

// A repair step's broadcast (agent/worker_repair.cc): SeqSpace::kRepair, 2 x epoch + 1.
bool repair_broadcast(const algorithms::Tag& tag) {
  return (tag.seq >> algorithms::kSeqSpaceShift) ==
             static_cast<std::uint64_t>(algorithms::SeqSpace::kRepair) &&
         (tag.seq & 1) == 1;
}

// The Link a Worker gets for one epoch: `fabric.link(rank)`, through the Worker's tap.
class TapLink final : public testing::ForwardingLink {
 public:
  TapLink(MemoryFabric& fabric, int rank, std::shared_ptr<Tap> tap, MemoryCoordinator& coordinator)
      : ForwardingLink(fabric.link(rank)),
        fabric_(fabric),
        tap_(std::move(tap)),
        coordinator_(coordinator) {
    // A dead process has no links in a later view either.
    if (tap_->dead.load()) fabric_.kill(inner_.rank());
  }
  Handle send(int peer, algorithms::Tag tag, std::span<const std::byte> data) override {
    const long index = tap_->sends.fetch_add(1);
    const bool in_repair = tap_->die_in_repair.load() && repair_broadcast(tag);
    if (in_repair) tap_->death = Death::kCut;
    if ((index == tap_->kill_at.load() || in_repair) && !tap_->dead.exchange(true)) {
      // Nothing it says reaches the coordinator any more, then its sockets go down. In
      // this order: a peer's report must find it silent.
      coordinator_.silence(tap_->member_id.load());
      if (tap_->death.load() == Death::kKill) {
        fabric_.kill(inner_.rank());
      } else {
        for (int p = 0; p < inner_.size(); ++p) {
          if (p != inner_.rank()) fabric_.fail_link(inner_.rank(), p);
        }
        inner_.abort(error(StatusCode::kAborted, "this rank was killed"));
      }
    }
    // From its death on, every operation of this rank fails (kAborted).
    return inner_.send(peer, tag, data);
  }

 private:
  MemoryFabric& fabric_;
  std::shared_ptr<Tap> tap_;
  MemoryCoordinator& coordinator_;
};

struct Scenario {
  int n = 0;
  int victim = -1;  // rank in the first view
  int calls = 0;
  std::size_t count = 0;  // floats per call
  std::size_t chunk_bytes = 0;
  long kill_at = kNever;  // the victim's send (0-based, over the run) before which it dies
  Death death = Death::kKill;
  // The survivors' next call after the run (a barrier). Without it, a survivor that
  // returned its last all-reduce early stays between calls, and only its idle recovery
  // moves it to the view the others need it in (Ready, and its copy for the repair).
  bool tail = true;
  // A second member (first-view rank) that dies in the repair step, if one runs with it
  // sending (see Tap::die_in_repair); -1: none.
  int repair_victim = -1;

  std::string describe() const {
    std::ostringstream s;
    s << "n=" << n << " victim=" << victim << " k=";
    if (kill_at == kNever) {
      s << "none";
    } else {
      s << kill_at << " (" << to_string(death) << ")";
    }
    s << " size=" << count * sizeof(float) << " B (" << count << " floats, " << calls
      << " calls, chunk " << chunk_bytes << " B)" << (tail ? "" : " no tail call");
    if (repair_victim >= 0) s << " repair victim=" << repair_victim;
    return s.str();
  }
};

// Rank `rank`'s input of call `call`, element i: distinct per rank and call, and sums of up
// to 8 of them are exact in float32 in any order.
float input(int rank, int call, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + call * 7 + static_cast<int>(i % 5));
}

struct RankRun {
  std::vector<Result<Outcome>> outcomes;
  std::vector<std::vector<float>> outputs;
  long sends_after_calls = 0;  // this rank's sends over its calls (the tail not counted)
  Result<Outcome> tail = error(StatusCode::kInternal, "not run");
  std::atomic<int> returned{0};  // calls returned so far (the timeout's report)
  std::atomic<bool> in_tail{false};
  std::atomic<bool> finished{false};
};

// "epoch E, C contributors" or the failure, for a report.
std::string describe(const Result<Outcome>& o) {
  if (!o.is_ok()) return o.status().to_string();
  return "epoch " + std::to_string(o.value().epoch) + ", " +
         std::to_string(o.value().contributors) + " contributors, attempt " +
         std::to_string(o.value().attempts);
}

struct ScenarioResult {
  std::vector<long> sends;  // by first-view rank, over the calls
  bool completed = false;   // every check ran (no early failure)
  // The call during which the victim died (-1: none), and whether the survivors kept its
  // result of epoch 1 (otherwise they re-ran it without the victim).
  int died_in = -1;
  bool died_in_committed = false;
  bool second_death = false;  // the repair victim died (in a repair step)
};

ScenarioResult run_scenario(const Scenario& sc) {
  SCOPED_TRACE(sc.describe());
  ScenarioResult result;
  const int n = sc.n;
  const auto nz = static_cast<std::size_t>(n);
  MemoryCoordinator coordinator(in_process::membership_config(n));
  Fabrics fabrics;
  std::vector<std::shared_ptr<Tap>> taps;  // by start thread
  for (int t = 0; t < n; ++t) taps.push_back(std::make_shared<Tap>());
  std::vector<std::unique_ptr<Worker>> workers(nz);  // by first-view rank
  std::vector<std::shared_ptr<Tap>> tap_of_rank(nz);
  {
    WorkerConfig config = in_process::worker_config(sc.chunk_bytes);
    // Probing sends messages of its own and would move the boundaries.
    config.measure_links = false;
    std::vector<std::unique_ptr<Worker>> started(nz);
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([&, t] {
        WorkerEnvironment env = in_process::environment(coordinator);
        env.connect_links = [&fabrics, &coordinator, tap = taps[static_cast<std::size_t>(t)]](
                                std::uint64_t epoch, int rank,
                                int size) -> Result<std::unique_ptr<algorithms::Link>> {
          return std::unique_ptr<algorithms::Link>(
              std::make_unique<TapLink>(fabrics.at(epoch, size), rank, tap, coordinator));
        };
        auto w = Worker::start(config, std::move(env));
        if (!w) {
          ADD_FAILURE() << "start: " << w.status().to_string();
          return;
        }
        started[static_cast<std::size_t>(t)] = std::move(*w);
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < n; ++t) {
      auto& w = started[static_cast<std::size_t>(t)];
      if (!w) {
        in_process::leave_all(started);
        return result;
      }
      const auto rank = static_cast<std::size_t>(w->rank());
      tap_of_rank.at(rank) = taps[static_cast<std::size_t>(t)];
      workers.at(rank) = std::move(w);
    }
  }
  const membership::View first = coordinator.view();
  EXPECT_EQ(first.epoch, 1u);
  EXPECT_EQ(first.size(), nz);
  std::vector<std::uint64_t> ids(nz);  // by first-view rank
  std::map<std::uint64_t, int> rank_of;
  for (int r = 0; r < n; ++r) {
    const auto rz = static_cast<std::size_t>(r);
    ids[rz] = workers[rz]->member_id();
    rank_of[ids[rz]] = r;
    tap_of_rank[rz]->member_id = ids[rz];
    const membership::ViewMember* m = first.find(ids[rz]);
    EXPECT_TRUE(m != nullptr && static_cast<int>(m->rank) == r) << "member " << ids[rz];
  }
  const bool kill = sc.kill_at != kNever;
  tap_of_rank[static_cast<std::size_t>(sc.victim)]->death = sc.death;
  tap_of_rank[static_cast<std::size_t>(sc.victim)]->kill_at = sc.kill_at;
  if (sc.repair_victim >= 0) {
    tap_of_rank[static_cast<std::size_t>(sc.repair_victim)]->die_in_repair = true;
  }
  // Who died, by first-view rank (the victim, and the repair victim once it sends).
  auto died = [&](int r) { return tap_of_rank[static_cast<std::size_t>(r)]->dead.load(); };

  std::atomic<bool> give_up{false};
  std::vector<RankRun> runs(nz);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const auto rz = static_cast<std::size_t>(r);
      RankRun& run = runs[rz];
      Worker& w = *workers[rz];
      const bool is_victim = (kill && r == sc.victim) || r == sc.repair_victim;
      for (int c = 0; c < sc.calls && !give_up.load(); ++c) {
        std::vector<float> in(sc.count);
        for (std::size_t i = 0; i < sc.count; ++i) in[i] = input(r, c, i);
        std::vector<float> out(sc.count, 0.0f);
        auto o = w.all_reduce(in.data(), out.data(), sc.count, DType::kFloat32, ReduceOp::kSum);
        const bool ok = o.is_ok();
        run.outcomes.push_back(std::move(o));
        run.outputs.push_back(std::move(out));
        ++run.returned;
        if (!ok && is_victim) break;  // dead: the rest of its calls fail too
      }
      run.sends_after_calls = tap_of_rank[rz]->sends.load();
      // The victim's death was the last thing it did; the others go on to their next call.
      if (!sc.tail) {
        run.tail = Outcome{};  // nothing to check: the idle recovery stands in for it
      } else if (!is_victim || !tap_of_rank[rz]->dead.load()) {
        run.in_tail = true;
        if (!give_up.load()) run.tail = w.barrier();
      }
      run.finished = true;
    });
  }

  // The test's part of the control plane: the survivors' reports are confirmed by the
  // victim's silence once the fake clock passes confirm_silence. One advance per
  // confirmation: more would run into the survivors' Ready timeout.
  const Duration confirm =
      membership::MembershipConfig{}.confirm_silence + std::chrono::milliseconds(1);
  const auto started_at = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_advance{};
  int advances = 0;
  bool timed_out = false;
  auto survivors_running = [&] {
    for (int r = 0; r < n; ++r) {
      if (died(r)) continue;
      if (!runs[static_cast<std::size_t>(r)].finished.load()) return true;
    }
    return false;
  };
  // A dead member the coordinator still counts in: the survivors' reports need the clock.
  auto dead_in_view = [&] {
    const membership::View v = coordinator.view();
    for (int r = 0; r < n; ++r) {
      if (died(r) && v.find(ids[static_cast<std::size_t>(r)]) != nullptr) return true;
    }
    return false;
  };
  while (survivors_running()) {
    const auto now = std::chrono::steady_clock::now();
    if (now - started_at > kScenarioLimit) {
      timed_out = true;
      break;
    }
    if (kill && coordinator.failure_reports() > 0 &&
        (advances == 0 || now - last_advance > std::chrono::milliseconds(50)) && dead_in_view()) {
      coordinator.advance(confirm);
      last_advance = now;
      ++advances;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<int> returned_by_then(nz);
  std::vector<bool> in_tail_by_then(nz);
  if (timed_out) {
    for (std::size_t r = 0; r < nz; ++r) {
      returned_by_then[r] = runs[r].returned.load();
      in_tail_by_then[r] = runs[r].in_tail.load() && !runs[r].finished.load();
    }
    give_up = true;
    fabrics.abort_all();
  }
  // The victim's thread ends once it learns it was removed (or, without a kill, with the
  // others). After a timeout, the aborted links and the recovery deadline end the others.
  for (auto& th : threads) th.join();
  in_process::leave_all(workers);
  if (timed_out) {
    std::ostringstream where;
    for (int r = 0; r < n; ++r) {
      const auto rz = static_cast<std::size_t>(r);
      where << "\n  rank " << r << (kill && r == sc.victim ? " (victim)" : "") << ": ";
      for (int c = 0; c < returned_by_then[rz]; ++c) {
        where << "call " << c << ": " << describe(runs[rz].outcomes[static_cast<std::size_t>(c)])
              << "; ";
      }
      if (in_tail_by_then[rz]) {
        where << "stuck in the tail barrier";
      } else if (returned_by_then[rz] < sc.calls && !(kill && r == sc.victim)) {
        where << "stuck in call " << returned_by_then[rz];
      }
    }
    ADD_FAILURE() << "the survivors did not finish within " << kScenarioLimit.count()
                  << " s (coordinator: view epoch " << coordinator.view().epoch << ", "
                  << coordinator.view().size() << " members, " << coordinator.failure_reports()
                  << " failure reports, " << advances
                  << " clock advances); at that time:" << where.str();
    return result;
  }

  result.sends.resize(nz);
  for (int r = 0; r < n; ++r)
    result.sends[static_cast<std::size_t>(r)] = runs[static_cast<std::size_t>(r)].sends_after_calls;
  if (kill) {
    const auto& vt = runs[static_cast<std::size_t>(sc.victim)];
    EXPECT_TRUE(tap_of_rank[static_cast<std::size_t>(sc.victim)]->dead.load())
        << "the victim made " << vt.sends_after_calls << " sends over its calls, fewer than k: "
        << "message counts differ between runs";
    EXPECT_LE(advances, sc.repair_victim >= 0 && died(sc.repair_victim) ? 2 : 1)
        << "each death's removal needs one confirmation";
  }

  // The checks, on the survivors only.
  std::vector<int> survivors;
  std::vector<std::uint64_t> survivor_ids;
  for (int r = 0; r < n; ++r) {
    if (died(r)) continue;
    survivors.push_back(r);
    survivor_ids.push_back(ids[static_cast<std::size_t>(r)]);
  }
  for (int r : survivors) {
    const RankRun& run = runs[static_cast<std::size_t>(r)];
    EXPECT_EQ(run.outcomes.size(), static_cast<std::size_t>(sc.calls)) << "rank " << r;
    EXPECT_TRUE(run.tail.is_ok()) << "rank " << r
                                  << " tail barrier: " << run.tail.status().to_string();
    for (std::size_t c = 0; c < run.outcomes.size(); ++c) {
      EXPECT_TRUE(run.outcomes[c].is_ok())
          << "rank " << r << " call " << c << ": " << run.outcomes[c].status().to_string();
      if (!kill && run.outcomes[c].is_ok()) {
        EXPECT_EQ(run.outcomes[c].value().attempts, 1) << "rank " << r << " call " << c;
      }
    }
  }
  if (::testing::Test::HasFailure()) return result;

  std::vector<float> expected(sc.count);
  for (int c = 0; c < sc.calls; ++c) {
    SCOPED_TRACE("call " + std::to_string(c));
    const auto cz = static_cast<std::size_t>(c);
    const int ref = survivors.front();
    const Outcome& o = runs[static_cast<std::size_t>(ref)].outcomes[cz].value();
    const std::vector<float>& bits = runs[static_cast<std::size_t>(ref)].outputs[cz];
    // Who contributed: everyone in the first epoch, the survivors in a later one.
    std::vector<std::uint64_t> contributors = o.contributor_ids;
    std::sort(contributors.begin(), contributors.end());
    std::vector<std::uint64_t> everyone = ids;
    std::sort(everyone.begin(), everyone.end());
    std::vector<std::uint64_t> without_victim = survivor_ids;
    std::sort(without_victim.begin(), without_victim.end());
    EXPECT_EQ(o.contributors, static_cast<int>(o.contributor_ids.size()));
    if (o.epoch == first.epoch) {
      EXPECT_EQ(contributors, everyone) << "a result of epoch 1 has every member's input";
    } else if (sc.repair_victim < 0) {
      EXPECT_GT(o.epoch, first.epoch);
      EXPECT_TRUE(kill) << "no kill, yet call " << c << " ran in epoch " << o.epoch;
      EXPECT_EQ(contributors, without_victim) << "a re-run has the survivors' inputs";
    } else {
      // Two deaths: a re-run has every survivor's input, and the second dead member's
      // if it ran before that member died.
      EXPECT_GT(o.epoch, first.epoch);
      EXPECT_TRUE(std::includes(contributors.begin(), contributors.end(),
                                without_victim.begin(), without_victim.end()))
          << "a re-run has every survivor's input";
      EXPECT_TRUE(std::includes(everyone.begin(), everyone.end(), contributors.begin(),
                                contributors.end()));
    }
    // The reference bits: the sum of the contributors' inputs.
    std::fill(expected.begin(), expected.end(), 0.0f);
    for (std::uint64_t id : o.contributor_ids) {
      auto it = rank_of.find(id);
      if (it == rank_of.end()) {
        ADD_FAILURE() << "contributor " << id << " is not a member of the first view";
        continue;
      }
      for (std::size_t i = 0; i < sc.count; ++i) expected[i] += input(it->second, c, i);
    }
    for (int r : survivors) {
      const RankRun& run = runs[static_cast<std::size_t>(r)];
      const Outcome& mine = run.outcomes[cz].value();
      EXPECT_EQ(mine.epoch, o.epoch) << "rank " << r << " vs rank " << ref;
      EXPECT_EQ(mine.contributor_ids, o.contributor_ids) << "rank " << r << " vs rank " << ref;
      EXPECT_EQ(std::memcmp(run.outputs[cz].data(), bits.data(), sc.count * sizeof(float)), 0)
          << "rank " << r << "'s result differs from rank " << ref << "'s";
      const auto first_wrong =
          std::mismatch(run.outputs[cz].begin(), run.outputs[cz].end(), expected.begin());
      if (first_wrong.first != run.outputs[cz].end()) {
        const auto i = static_cast<std::size_t>(first_wrong.first - run.outputs[cz].begin());
        ADD_FAILURE() << "rank " << r << " element " << i << ": " << *first_wrong.first
                      << ", the contributors' inputs sum to " << expected[i];
      }
    }
  }
  if (kill) {
    const RankRun& v = runs[static_cast<std::size_t>(sc.victim)];
    for (std::size_t c = 0; c < v.outcomes.size(); ++c) {
      if (v.outcomes[c].is_ok()) continue;
      result.died_in = static_cast<int>(c);
      result.died_in_committed =
          runs[static_cast<std::size_t>(survivors.front())].outcomes[c].value().epoch ==
          first.epoch;
      break;
    }
  }
  result.second_death = sc.repair_victim >= 0 && died(sc.repair_victim);
  result.completed = !::testing::Test::HasFailure();
  return result;
}

struct Size {
  const char* name;
  std::size_t count;
  int calls;
  std::size_t chunk_bytes;
};
// Small: a few 4 KiB all-reduces (what the speculative design returns without the
// agreement round). Large: 512 KiB in 64 KiB chunks, many messages per call.
constexpr Size kSmall{"small", 1024, 3, 256 * 1024};
constexpr Size kLarge{"large", 128 * 1024, 2, 64 * 1024};

struct SweepParam {
  int n;
  Size size;
  Death death;
  bool tail = true;
};
void PrintTo(const SweepParam& p, std::ostream* os) {
  *os << "n=" << p.n << " " << p.size.name << " " << to_string(p.death)
      << (p.tail ? "" : " no tail call");
}

class KillBoundary : public ::testing::TestWithParam<SweepParam> {
 protected:
  void SetUp() override { quiet_logs(); }
};

// The victim of boundary k: rank k % n, or the next rank that makes more than k sends
// (ranks may send different counts: a tree's root and leaves).
int victim_of(long k, const std::vector<long>& sends) {
  const int n = static_cast<int>(sends.size());
  for (int i = 0; i < n; ++i) {
    const int r = static_cast<int>((k + i) % n);
    if (sends[static_cast<std::size_t>(r)] > k) return r;
  }
  return -1;
}

// Every boundary k of the run: counted first without a kill, then killed at each.
TEST_P(KillBoundary, EveryMessageBoundaryIsAllOrNothing) {
  const SweepParam p = GetParam();
  Scenario sc{p.n, 0, p.size.calls, p.size.count, p.size.chunk_bytes, kNever, p.death, p.tail};
  const ScenarioResult counted = run_scenario(sc);
  ASSERT_TRUE(counted.completed) << "the run without a kill failed";
  const long most = *std::max_element(counted.sends.begin(), counted.sends.end());
  std::ostringstream counts;
  for (long s : counted.sends) counts << ' ' << s;
  RecordProperty("sends_by_rank", counts.str());
  ASSERT_GT(most, 0);
  int kept = 0;    // the call the victim died in committed in epoch 1
  int re_run = 0;  // it was re-run by the survivors
  for (long k = 0; k < most; ++k) {
    sc.kill_at = k;
    sc.victim = victim_of(k, counted.sends);
    ASSERT_GE(sc.victim, 0);
    const ScenarioResult r = run_scenario(sc);
    ASSERT_TRUE(r.completed) << "first failing boundary: " << sc.describe()
                             << "; sends by rank without a kill:" << counts.str();
    ASSERT_GE(r.died_in, 0) << sc.describe();
    ++(r.died_in_committed ? kept : re_run);
  }
  // For the reader: how the sweep ended (nothing is assumed about the split).
  std::printf(
      "  %ld boundaries (sends by rank:%s): the call the victim died in was kept "
      "from epoch 1 %d times, re-run %d times\n",
      most, counts.str().c_str(), kept, re_run);
  RecordProperty("kept", kept);
  RecordProperty("re_run", re_run);
}

std::vector<SweepParam> sweep() {
  std::vector<SweepParam> out;
  for (Death d : {Death::kCut, Death::kKill}) {
    for (const Size& s : {kSmall, kLarge}) {
      for (int n = 2; n <= 8; ++n) out.push_back({n, s, d});
    }
  }
  // Small all-reduces return early (no commit round): the members that did so must be
  // moved to the new view between calls, with no next call to do it.
  for (int n = 2; n <= 8; ++n) out.push_back({n, kSmall, Death::kCut, false});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Worlds, KillBoundary, ::testing::ValuesIn(sweep()),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return std::string(to_string(info.param.death)) + "_" +
                                  info.param.size.name + "_n" + std::to_string(info.param.n) +
                                  (info.param.tail ? "" : "_no_tail");
                         });

// A second death inside the recovery from the first: for every boundary k of the small run
// (exact cut) and every other rank as the second victim, that rank dies before its first
// send of a repair step's broadcast, i.e. while giving (or relaying) its copy to a
// survivor that lacks it. The next view applies the rule again: another survivor's copy,
// or, when nobody holds one any more, a re-run. The same checks hold.
TEST(KillBoundaryRepair, ASecondDeathDuringTheRepairIsAllOrNothing) {
  quiet_logs();
  int scenarios = 0;
  int second_deaths = 0;
  for (int n = 3; n <= 6; ++n) {
    Scenario sc{n, 0, kSmall.calls, kSmall.count, kSmall.chunk_bytes, kNever, Death::kCut};
    const ScenarioResult counted = run_scenario(sc);
    ASSERT_TRUE(counted.completed) << "the run without a kill failed";
    const long most = *std::max_element(counted.sends.begin(), counted.sends.end());
    for (long k = 0; k < most; ++k) {
      sc.kill_at = k;
      sc.victim = victim_of(k, counted.sends);
      for (int rv = 0; rv < n; ++rv) {
        if (rv == sc.victim) continue;
        sc.repair_victim = rv;
        const ScenarioResult r = run_scenario(sc);
        ASSERT_TRUE(r.completed) << "first failing scenario: " << sc.describe();
        ++scenarios;
        second_deaths += r.second_death ? 1 : 0;
      }
    }
  }
  std::printf("  %d scenarios, the second victim died in a repair in %d\n", scenarios,
              second_deaths);
  EXPECT_GT(second_deaths, 0) << "no scenario reached a repair broadcast: nothing was tested";
}

// Without a kill (N=4, the small run): every call commits in the first view, at the first
// attempt, with every member contributing.
TEST(KillBoundaryBaseline, WithoutAKillEveryCallCommitsInTheFirstEpoch) {
  quiet_logs();
  constexpr int kN = 4;
  MemoryCoordinator coordinator(in_process::membership_config(kN));
  Fabrics fabrics;
  auto tap = std::make_shared<Tap>();
  WorkerConfig config = in_process::worker_config();
  config.measure_links = false;
  std::vector<std::unique_ptr<Worker>> workers(kN);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kN; ++t) {
      threads.emplace_back([&, t] {
        WorkerEnvironment env = in_process::environment(coordinator);
        env.connect_links = [&](std::uint64_t epoch, int rank,
                                int size) -> Result<std::unique_ptr<algorithms::Link>> {
          return std::unique_ptr<algorithms::Link>(
              std::make_unique<TapLink>(fabrics.at(epoch, size), rank, tap, coordinator));
        };
        auto w = Worker::start(config, std::move(env));
        if (!w) {
          ADD_FAILURE() << w.status().to_string();
          return;
        }
        workers[static_cast<std::size_t>(t)] = std::move(*w);
      });
    }
    for (auto& th : threads) th.join();
  }
  for (const auto& w : workers) ASSERT_NE(w, nullptr);
  std::vector<std::uint64_t> ids;  // by rank
  for (int r = 0; r < kN; ++r) {
    for (const auto& w : workers) {
      if (w->rank() == r) ids.push_back(w->member_id());
    }
  }
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(kN));
  const int calls = kSmall.calls;
  // [thread][call]
  std::vector<std::vector<Result<Outcome>>> outcomes(kN);
  std::vector<std::vector<std::vector<float>>> outputs(kN);
  std::vector<int> ranks(kN);
  std::vector<std::thread> threads;
  for (int t = 0; t < kN; ++t) {
    threads.emplace_back([&, t] {
      const auto tz = static_cast<std::size_t>(t);
      const int r = workers[tz]->rank();
      ranks[tz] = r;
      for (int c = 0; c < calls; ++c) {
        std::vector<float> in(kSmall.count);
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = input(r, c, i);
        std::vector<float> out(kSmall.count, 0.0f);
        outcomes[tz].push_back(workers[tz]->all_reduce(in.data(), out.data(), in.size(),
                                                       DType::kFloat32, ReduceOp::kSum));
        outputs[tz].push_back(std::move(out));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kN; ++t) {
    const auto tz = static_cast<std::size_t>(t);
    ASSERT_EQ(outcomes[tz].size(), static_cast<std::size_t>(calls));
    for (int c = 0; c < calls; ++c) {
      SCOPED_TRACE("rank " + std::to_string(ranks[tz]) + " call " + std::to_string(c));
      const auto cz = static_cast<std::size_t>(c);
      ASSERT_TRUE(outcomes[tz][cz].is_ok()) << outcomes[tz][cz].status().to_string();
      const Outcome& o = outcomes[tz][cz].value();
      EXPECT_EQ(o.epoch, 1u);
      EXPECT_EQ(o.contributors, kN);
      EXPECT_EQ(o.contributor_ids, ids);
      EXPECT_EQ(o.attempts, 1);
      for (std::size_t i = 0; i < kSmall.count; ++i) {
        float sum = 0;
        for (int r = 0; r < kN; ++r) sum += input(r, c, i);
        ASSERT_EQ(outputs[tz][cz][i], sum) << "element " << i;
      }
    }
  }
  EXPECT_EQ(coordinator.views_issued(), 1);
  EXPECT_GT(tap->sends.load(), 0) << "the Workers' links are the fabric's";
  in_process::leave_all(workers);
}

}  // namespace
}  // namespace tributary::agent
