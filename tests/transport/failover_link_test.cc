// FailoverLink (transport/failover_link.h) over two in-memory paths per pair, ranks as
// threads: a path broken (kPeerLost) or silenced (a pulled cable: nothing fails, nothing
// arrives) at a chosen send of a chosen rank, mid-collective, for every all-reduce
// algorithm. Every run must give the bits of the same algorithm without the fault, and
// the pair must have moved. Time for the stall deadline is a FakeClock that moves only
// while a rank blocks in a path (1 ms per blocking slice; tests/support/fault_path.h), so
// no test sleeps. The paths add jitter (FaultPath::jitter) to vary the interleavings.
#include "transport/failover_link.h"

#include "transport/absent_path.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/support/fault_path.h"
#include "tests/support/rank_threads.h"

namespace tributary {
namespace {

using algorithms::AllReduceAlgorithm;
using algorithms::MemoryFabric;
using algorithms::PollableLink;
using algorithms::Tag;
using testing::FaultPath;

enum class Fault { kBreak, kSilence };

// `paths` paths per pair (two by default) for `n` ranks, and what every rank's link
// reported moving.
class TwoPaths {
 public:
  // `combining`: the paths combine receives (Link::combines), so the collectives use
  // recv_combine on the failover link.
  explicit TwoPaths(int n, int paths = 2, bool combining = false) : n_(n) {
    for (int k = 0; k < paths; ++k) {
      fabrics_.push_back(std::make_unique<MemoryFabric>(n));
      fabrics_.back()->set_combining(combining);
    }
  }
  // Applied to every link's parameters before it is made (the second with the rank).
  std::function<void(transport::FailoverParams&)> tune;
  std::function<void(int, transport::FailoverParams&)> tune_rank;
  MemoryFabric& fabric(int k) { return *fabrics_[static_cast<std::size_t>(k)]; }
  FakeClock& clock() { return clock_; }

  // Rank r's failover link; `setup` may arm its paths before the link takes them.
  std::unique_ptr<algorithms::Link> link(int r, Duration stall,
                                         const std::function<void(FaultPath&, int)>& setup = {}) {
    std::vector<std::unique_ptr<PollableLink>> paths;
    for (int k = 0; k < static_cast<int>(fabrics_.size()); ++k) {
      auto path = std::make_unique<FaultPath>(fabric(k).pollable(r), &clock_);
      if (setup) setup(*path, k);
      paths.push_back(std::move(path));
    }
    transport::FailoverParams params;
    params.epoch = 1;
    params.path_names = {"preferred", "standby", "last resort"};
    params.path_names.resize(fabrics_.size());
    params.stall_deadline = stall;
    params.probe_interval = std::chrono::milliseconds(20);
    params.clock = &clock_;
    params.on_change = [this, r](const transport::PathChange& c) { note(r, c); };
    if (tune) tune(params);
    if (tune_rank) tune_rank(r, params);
    auto made = transport::make_failover_link(std::move(params), std::move(paths));
    EXPECT_TRUE(made.is_ok());
    return std::move(*made);
  }

  // True when rank `r` moved its pair with `peer` from path `from` to path `to`.
  bool moved(int r, int peer, int from = 0, int to = 1) { return moves(r, peer, from, to) > 0; }
  int moves(int r, int peer, int from, int to) {
    std::lock_guard lock(mu_);
    int count = 0;
    for (const auto& [who, c] : changes_) {
      count += who == r && c.peer == peer && c.from == from && c.to == to ? 1 : 0;
    }
    return count;
  }
  // The path rank `r` last moved its pair with `peer` to (0 when it never moved).
  int last_to(int r, int peer) {
    std::lock_guard lock(mu_);
    int to = 0;
    for (const auto& [who, c] : changes_) {
      if (who == r && c.peer == peer) to = c.to;
    }
    return to;
  }
  bool any_recovered_flag_wrong() {
    std::lock_guard lock(mu_);
    for (const auto& [who, c] : changes_) {
      if (c.recovered != (c.to >= 0 && c.to < c.from)) return true;
    }
    return false;
  }
  void note(int r, const transport::PathChange& c) {
    std::lock_guard lock(mu_);
    changes_.push_back({r, c});
  }
  std::size_t changes() {
    std::lock_guard lock(mu_);
    return changes_.size();
  }
  bool any_stranded() {
    std::lock_guard lock(mu_);
    for (const auto& [who, c] : changes_) {
      if (c.stranded && c.to == -1) return true;
    }
    return false;
  }
  bool any_lost() {
    std::lock_guard lock(mu_);
    for (const auto& [who, c] : changes_) {
      if (c.to < 0) return true;
    }
    return false;
  }

 private:
  int n_;
  std::vector<std::unique_ptr<MemoryFabric>> fabrics_;
  FakeClock clock_;
  std::mutex mu_;
  std::vector<std::pair<int, transport::PathChange>> changes_;
};

std::vector<float> random_floats(int rank, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(1000 + rank));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen) * 1e3f;  // sums that depend on their association
  return v;
}

algorithms::CollectiveOptions options_for(AllReduceAlgorithm algorithm) {
  algorithms::CollectiveOptions o;
  o.seq = 3;
  o.algorithm = algorithm;
  o.chunk_bytes = 256;  // many chunks: the fault lands mid-pipeline
  o.deadline = Deadline::after(std::chrono::seconds(20));
  return o;
}

// The same algorithm's result with no failover link and no fault: the reference bits.
std::vector<std::vector<float>> reference(AllReduceAlgorithm algorithm, int n, std::size_t count,
                                          bool combining = false) {
  MemoryFabric fabric(n);
  fabric.set_combining(combining);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n), std::vector<float>(count));
  const auto statuses = testing::run_ranks(n, [&](int r) {
    const std::vector<float> in = random_floats(r, count);
    return all_reduce(fabric.link(r), in.data(), out[static_cast<std::size_t>(r)].data(), count,
                      DType::kFloat32, ReduceOp::kSum, options_for(algorithm));
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

// The end of a link's use in the runtime: every rank drains (its messages acknowledged)
// and keeps its link served until every rank has, so nobody's last acknowledgement is
// lost with a link that went away.
Status serve_until_all_drained(algorithms::Link& link, std::atomic<int>& drained, int n) {
  const auto give_up = Deadline::after(std::chrono::seconds(20));
  TRIB_RETURN_IF_ERROR(transport::drain(link, give_up));
  ++drained;
  while (drained.load() < n) {
    if (give_up.passed()) return error(StatusCode::kTimedOut, "peers did not drain");
    std::this_thread::yield();  // its own part is done; the others need the CPU
    const Status st = transport::drain(link, Deadline::after(std::chrono::milliseconds(1)));
    if (!st.is_ok()) return st;
  }
  return Status();
}

struct FaultCase {
  AllReduceAlgorithm algorithm;
  int n;
  Fault fault;
  int at_send;  // the victim's send on its preferred path that triggers the fault
  bool combining = false;  // the paths combine: receives reduce as they land
};

std::string name_of(const ::testing::TestParamInfo<FaultCase>& info) {
  const FaultCase& c = info.param;
  return std::string(to_string(c.algorithm)) + "_n" + std::to_string(c.n) +
         (c.fault == Fault::kBreak ? "_break" : "_silence") + "_at" + std::to_string(c.at_send) +
         (c.combining ? "_combining" : "");
}

class AllReduceFailover : public ::testing::TestWithParam<FaultCase> {};

TEST_P(AllReduceFailover, SameBitsAsWithoutTheFaultAndThePairMoved) {
  const FaultCase& c = GetParam();
  constexpr std::size_t kCount = 1537;  // odd: uneven blocks
  const auto expected = reference(c.algorithm, c.n, kCount, c.combining);
  TwoPaths paths(c.n, 2, c.combining);
  // Rank 0's preferred path to rank 1 fails when rank 0 posts its at_send-th send there.
  const int a = 0, b = 1;
  std::atomic<bool> fired{false};
  std::atomic<int> drained{0};
  std::vector<std::vector<float>> out(static_cast<std::size_t>(c.n), std::vector<float>(kCount));
  const auto statuses = testing::run_ranks(c.n, [&](int r) {
    auto link = paths.link(r, std::chrono::milliseconds(200), [&](FaultPath& path, int k) {
      path.jitter(std::random_device{}());  // interleavings vary by run, not reproducible
      if (r != a || k != 0) return;
      path.fire_at(c.at_send, [&] {
        fired = true;
        if (c.fault == Fault::kBreak) {
          paths.fabric(0).fail_link(a, b);
        } else {
          paths.fabric(0).silence_link(a, b);
        }
      });
    });
    const std::vector<float> in = random_floats(r, kCount);
    TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out[static_cast<std::size_t>(r)].data(),
                                    kCount, DType::kFloat32, ReduceOp::kSum,
                                    options_for(c.algorithm)));
    // As the runtime's commit round does: a rank whose part is over keeps waiting on the
    // link, so a resume that arrives after its last receive is still answered.
    algorithms::CollectiveOptions after = options_for(c.algorithm);
    after.seq = 4;
    TRIB_RETURN_IF_ERROR(barrier(*link, after));
    return serve_until_all_drained(*link, drained, c.n);
  });
  ASSERT_TRUE(fired.load()) << "the fault never fired: at_send is past the victim's sends";
  bool all_ok = true;
  for (int r = 0; r < c.n; ++r) {  // every rank's status: the first failure may be a symptom
    const auto i = static_cast<std::size_t>(r);
    EXPECT_TRUE(statuses[i].is_ok()) << "rank " << r << ": " << statuses[i].to_string();
    all_ok = all_ok && statuses[i].is_ok();
  }
  ASSERT_TRUE(all_ok);
  for (int r = 0; r < c.n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), kCount * sizeof(float)), 0)
        << "rank " << r << " differs from the run without the fault";
  }
  EXPECT_TRUE(paths.moved(a, b)) << "rank 0 never left its preferred path to rank 1";
  EXPECT_TRUE(paths.moved(b, a)) << "rank 1 never followed rank 0 to the standby path";
  EXPECT_FALSE(paths.any_lost());
}

std::vector<FaultCase> fault_cases() {
  std::vector<FaultCase> cases;
  const AllReduceAlgorithm algorithms[] = {AllReduceAlgorithm::kAuto,
                                           AllReduceAlgorithm::kRing,
                                           AllReduceAlgorithm::kTree,
                                           AllReduceAlgorithm::kDoubleTree,
                                           AllReduceAlgorithm::kHalvingDoubling,
                                           AllReduceAlgorithm::kDirect};
  for (AllReduceAlgorithm algorithm : algorithms) {
    for (int n : {2, 3, 5}) {
      for (Fault fault : {Fault::kBreak, Fault::kSilence}) {
        // Counted in path sends (until the pair's first move, the caller's messages and an
        // occasional acknowledgement, whose count depends on timing): the first (nothing
        // out yet) and one mid-collective (the direct algorithm, which auto picks for these
        // sizes at n = 2, sends one message per peer: its second is the barrier's).
        const bool few = algorithm == AllReduceAlgorithm::kDirect ||
                         (algorithm == AllReduceAlgorithm::kAuto && n == 2);
        for (int at : {1, few ? 2 : 7}) {
          cases.push_back({algorithm, n, fault, at});
          // The algorithms that reduce as they receive (recv_combine): combined in place by
          // the path until the move, from a buffer after it.
          if (algorithm == AllReduceAlgorithm::kRing || algorithm == AllReduceAlgorithm::kTree ||
              algorithm == AllReduceAlgorithm::kHalvingDoubling) {
            cases.push_back({algorithm, n, fault, at, true});
          }
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, AllReduceFailover, ::testing::ValuesIn(fault_cases()),
                         name_of);

std::vector<std::byte> message(int i, std::size_t size) {
  std::vector<std::byte> m(size);
  for (std::size_t j = 0; j < size; ++j) m[j] = static_cast<std::byte>(i * 31 + j);
  return m;
}

// Messages with the same tag are matched in order, also when some went over the broken
// path, some over the next, and the receives are posted late and in another tag order.
TEST(FailoverLink, SameTagOrderSurvivesAMove) {
  TwoPaths paths(2);
  const Tag tags[] = {{1, 0, 9}, {1, 0, 9}, {2, 0, 9}, {1, 0, 9}, {2, 0, 9}, {1, 0, 9}};
  constexpr int kMessages = 6;
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(200), [&](FaultPath& path, int k) {
      // Rank 0's 5th path send (its fifth message: no descriptors before a move): the
      // path breaks.
      if (r == 0 && k == 0) path.fire_at(5, [&] { paths.fabric(0).fail_link(0, 1); });
    });
    const auto deadline = Deadline::after(std::chrono::seconds(10));
    if (r == 0) {
      std::vector<std::vector<std::byte>> out;
      for (int i = 0; i < kMessages; ++i) out.push_back(message(i, 100 + i));
      std::vector<algorithms::Link::Handle> hs;
      for (int i = 0; i < kMessages; ++i) hs.push_back(link->send(1, tags[i], out[i]));
      for (auto h : hs) TRIB_RETURN_IF_ERROR(link->wait(h, deadline));
    } else {
      // Tag 2 first, then tag 1: each in its own send order.
      const int order[] = {2, 4, 0, 1, 3, 5};
      std::vector<std::vector<std::byte>> in(kMessages);
      std::vector<algorithms::Link::Handle> hs;
      for (int i : order) {
        in[i].resize(100 + i);
        hs.push_back(link->recv(0, tags[i], in[i]));
      }
      for (auto h : hs) TRIB_RETURN_IF_ERROR(link->wait(h, deadline));
      for (int i = 0; i < kMessages; ++i) {
        if (in[i] != message(i, 100 + i)) {
          return error(StatusCode::kInternal, "message " + std::to_string(i) + " wrong");
        }
      }
    }
    return transport::drain(*link, deadline);
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_TRUE(paths.moved(0, 1));
}

// Until a pair's first move the failover link adds no message of its own: each of the
// caller's messages is one path message under the caller's tag (numbered by its stamp), and
// the acknowledgements ride on the messages going back. Acknowledgements of their own are
// held off (ack_every, ack_delay) so that any would show in the counts.
TEST(FailoverLink, BeforeAMoveItSendsOnlyTheCallersMessages) {
  TwoPaths paths(2);
  paths.tune = [](transport::FailoverParams& p) {
    p.ack_every = 1000;
    p.ack_delay = std::chrono::hours(1);
  };
  constexpr int kRounds = 10;
  std::array<FaultPath*, 2> preferred{}, standby{};
  std::array<std::unique_ptr<algorithms::Link>, 2> links;
  for (int r = 0; r < 2; ++r) {
    links[static_cast<std::size_t>(r)] =
        paths.link(r, std::chrono::seconds(2), [&](FaultPath& path, int k) {
          (k == 0 ? preferred : standby)[static_cast<std::size_t>(r)] = &path;
        });
  }
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    algorithms::Link& link = *links[static_cast<std::size_t>(r)];
    const int peer = 1 - r;
    const auto deadline = Deadline::after(std::chrono::seconds(10));
    for (int i = 0; i < kRounds; ++i) {
      // Rank 0 asks, rank 1 answers: every message but rank 1's last has one coming back.
      const std::vector<std::byte> out = message(r * 100 + i, 64 + static_cast<std::size_t>(i));
      std::vector<std::byte> in(64 + static_cast<std::size_t>(i));
      const Tag ask{static_cast<std::uint64_t>(i + 1), 0, 5};
      const Tag answer{static_cast<std::uint64_t>(i + 1), 1, 5};
      if (r == 0) {
        const auto s = link.send(peer, ask, out);
        const auto h = link.recv(peer, answer, in);
        TRIB_RETURN_IF_ERROR(link.wait(s, deadline));
        TRIB_RETURN_IF_ERROR(link.wait(h, deadline));
      } else {
        TRIB_RETURN_IF_ERROR(link.wait(link.recv(peer, ask, in), deadline));
        TRIB_RETURN_IF_ERROR(link.wait(link.send(peer, answer, out), deadline));
      }
      if (in != message(peer * 100 + i, 64 + static_cast<std::size_t>(i))) {
        return error(StatusCode::kInternal, "message " + std::to_string(i) + " wrong");
      }
    }
    return Status();
  });
  for (const Status& st : statuses) ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(preferred[0]->sends(), kRounds) << "rank 0 sent more than its messages";
  EXPECT_EQ(preferred[1]->sends(), kRounds) << "rank 1 sent more than its messages";
  EXPECT_EQ(standby[0]->sends() + standby[1]->sends(), 0);
  // Rank 0's messages were acknowledged by the answers' stamps alone: settled at once.
  EXPECT_TRUE(transport::drain(*links[0], Deadline::after(std::chrono::seconds(5))).is_ok());
  EXPECT_EQ(preferred[1]->sends(), kRounds);
  // Rank 1's last answer had nothing coming back: settling rank 0 acknowledges it (one
  // acknowledgement of its own), and then rank 1 settles.
  EXPECT_TRUE(transport::drain(*links[0], Deadline::after(std::chrono::seconds(5))).is_ok());
  EXPECT_EQ(preferred[0]->sends(), kRounds + 1);
  EXPECT_TRUE(transport::drain(*links[1], Deadline::after(std::chrono::seconds(5))).is_ok());
  EXPECT_TRUE(paths.any_lost() == false);
}

// A large message's send completes with its acknowledgement (the fast stint keeps no copy
// of it), which the receiver sends as soon as the message is in, also when it arrived
// before its receive was posted: two ranks that each wait for all their large sends before
// posting any receive (halving-doubling's send window does so) must not wait for each
// other.
TEST(FailoverLink, LargeSendsWaitedForBeforeAnyReceiveComplete) {
  TwoPaths paths(2);
  constexpr int kMessages = 4;
  constexpr std::size_t kBytes = 256 * 1024;
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::seconds(2));
    const int peer = 1 - r;
    const auto deadline = Deadline::after(std::chrono::seconds(10));
    std::vector<std::vector<std::byte>> out, in(kMessages, std::vector<std::byte>(kBytes));
    std::vector<algorithms::Link::Handle> sends;
    for (int i = 0; i < kMessages; ++i) out.push_back(message(r * 10 + i, kBytes));
    for (int i = 0; i < kMessages; ++i) {
      sends.push_back(link->send(peer, Tag{static_cast<std::uint64_t>(i + 1), 0, 1}, out[i]));
    }
    for (auto h : sends) TRIB_RETURN_IF_ERROR(link->wait(h, deadline));
    for (int i = 0; i < kMessages; ++i) {
      TRIB_RETURN_IF_ERROR(link->wait(
          link->recv(peer, Tag{static_cast<std::uint64_t>(i + 1), 0, 1}, in[i]), deadline));
      if (in[i] != message(peer * 10 + i, kBytes)) {
        return error(StatusCode::kInternal, "message " + std::to_string(i) + " wrong");
      }
    }
    return Status();
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_FALSE(paths.any_lost());
}

// Messages that arrived before their receives were posted are acknowledged (so they will
// not be resent); when the pair then moves, they are read back from the path they wait in
// and taken by the receives posted after the move, small and large alike, in order.
TEST(FailoverLink, WhatArrivedEarlyIsReadBackWhenThePairMoves) {
  TwoPaths paths(2);
  const std::size_t sizes[] = {100, 128 * 1024, 100};
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::seconds(2), [&](FaultPath& path, int k) {
      // Rank 0's fourth send on its preferred path: the path breaks.
      if (r == 0 && k == 0) path.fire_at(4, [&] { paths.fabric(0).fail_link(0, 1); });
    });
    const auto deadline = Deadline::after(std::chrono::seconds(10));
    const std::vector<std::byte> last = message(99, 64);
    if (r == 0) {
      std::vector<std::vector<std::byte>> out;
      std::vector<algorithms::Link::Handle> hs;
      for (int i = 0; i < 3; ++i) out.push_back(message(i, sizes[i]));
      for (int i = 0; i < 3; ++i) {
        hs.push_back(link->send(1, Tag{static_cast<std::uint64_t>(i + 1), 0, 2}, out[i]));
      }
      // The large one completes only once rank 1 acknowledged it, before its receive.
      for (auto h : hs) TRIB_RETURN_IF_ERROR(link->wait(h, deadline));
      TRIB_RETURN_IF_ERROR(link->wait(link->send(1, Tag{4, 0, 2}, last), deadline));
      return transport::drain(*link, deadline);
    }
    std::vector<std::byte> got(64);
    TRIB_RETURN_IF_ERROR(link->wait(link->recv(0, Tag{4, 0, 2}, got), deadline));
    if (got != last) return error(StatusCode::kInternal, "the last message is wrong");
    for (int i = 0; i < 3; ++i) {
      std::vector<std::byte> in(sizes[i]);
      TRIB_RETURN_IF_ERROR(
          link->wait(link->recv(0, Tag{static_cast<std::uint64_t>(i + 1), 0, 2}, in), deadline));
      if (in != message(i, sizes[i])) {
        return error(StatusCode::kInternal, "message " + std::to_string(i) + " wrong");
      }
    }
    return Status();
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_TRUE(paths.moved(0, 1));
  EXPECT_TRUE(paths.moved(1, 0));
  EXPECT_FALSE(paths.any_lost());
}

// Without a fault the failover link is just a link: sizes from empty to many chunks, a
// group of one to four, several collectives back to back on one link, same bits as the
// plain in-memory link.
TEST(FailoverLink, WithoutAFaultItIsAPlainLink) {
  for (int n = 1; n <= 4; ++n) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{5000}}) {
      std::vector<std::vector<float>> expected(static_cast<std::size_t>(n));
      {
        MemoryFabric fabric(n);
        testing::run_ranks(n, [&](int r) -> Status {
          auto& mine = expected[static_cast<std::size_t>(r)];
          mine = random_floats(r, count);
          for (std::uint64_t seq = 1; seq <= 3; ++seq) {
            auto o = options_for(AllReduceAlgorithm::kAuto);
            o.seq = seq;
            TRIB_RETURN_IF_ERROR(all_reduce(fabric.link(r), mine.data(), mine.data(), count,
                                            DType::kFloat32, ReduceOp::kSum, o));
          }
          return Status();
        });
      }
      TwoPaths paths(n);
      std::atomic<int> drained{0};
      std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
      const auto statuses = testing::run_ranks(n, [&](int r) -> Status {
        auto link = paths.link(r, std::chrono::seconds(2));
        auto& mine = out[static_cast<std::size_t>(r)];
        mine = random_floats(r, count);
        for (std::uint64_t seq = 1; seq <= 3; ++seq) {
          auto o = options_for(AllReduceAlgorithm::kAuto);
          o.seq = seq;
          TRIB_RETURN_IF_ERROR(all_reduce(*link, mine.data(), mine.data(), count, DType::kFloat32,
                                          ReduceOp::kSum, o));
        }
        return serve_until_all_drained(*link, drained, n);
      });
      for (int r = 0; r < n; ++r) {
        const auto i = static_cast<std::size_t>(r);
        ASSERT_TRUE(statuses[i].is_ok())
            << "n=" << n << " count=" << count << ": " << statuses[i].to_string();
        ASSERT_EQ(out[i].size(), expected[i].size());
        if (count == 0) continue;  // no bytes to compare (and memcmp wants real pointers)
        EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), count * sizeof(float)), 0)
            << "n=" << n << " count=" << count << " rank " << r;
      }
      EXPECT_FALSE(paths.any_lost());
    }
  }
}

// Two moves in one collective: the preferred path breaks early, the standby goes silent
// later (its messages kept in copies by then), and the ring still ends with the same bits
// over the third path.
enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kGather, kScatter,
                  kAllToAll };
constexpr Kind kKinds[] = {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather,
                           Kind::kBroadcast, Kind::kReduce, Kind::kGather, Kind::kScatter,
                           Kind::kAllToAll};
const char* kind_name(Kind k) {
  static const char* const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                      "reduce", "gather", "scatter", "all_to_all"};
  return names[static_cast<int>(k)];
}

// One collective of `kind` on `link` with `count` elements per block, root n - 1; `out`
// sized for every rank's largest result (n blocks).
Status run_kind(Kind kind, algorithms::Link& link, int n, std::size_t count,
                const std::vector<float>& in, std::vector<float>& out) {
  algorithms::CollectiveOptions o = options_for(AllReduceAlgorithm::kAuto);
  const int root = n - 1;
  const DType f32 = DType::kFloat32;
  switch (kind) {
    case Kind::kAllReduce:
      return all_reduce(link, in.data(), out.data(), count, f32, ReduceOp::kSum, o);
    case Kind::kReduceScatter:
      return reduce_scatter(link, in.data(), out.data(), count, f32, ReduceOp::kSum, o);
    case Kind::kAllGather: return all_gather(link, in.data(), out.data(), count, f32, o);
    case Kind::kBroadcast: return broadcast(link, in.data(), out.data(), count, f32, root, o);
    case Kind::kReduce:
      return reduce(link, in.data(), out.data(), count, f32, ReduceOp::kSum, root, o);
    case Kind::kGather: return gather(link, in.data(), out.data(), count, f32, root, o);
    case Kind::kScatter: return scatter(link, in.data(), out.data(), count, f32, root, o);
    case Kind::kAllToAll: return all_to_all(link, in.data(), out.data(), count, f32, o);
  }
  return error(StatusCode::kInternal, "unknown kind");
}

// A path cut (broken or silenced) at a random moment of a random collective of every kind,
// N = 2..8, a random pair: the same bits as that collective without the fault, no pair
// lost. Seeded, so a failure names its run; 48 runs (every kind six times) in CI, more with
// TRIBUTARY_FAILOVER_RUNS and another seed with TRIBUTARY_FAILOVER_SEED (offline soaks).
TEST(FailoverLink, ACutAtARandomMomentOfEveryCollectiveKind) {
  constexpr std::size_t kCount = 301;  // per block; odd, many 256-byte chunks
  const char* seed_env = std::getenv("TRIBUTARY_FAILOVER_SEED");
  const char* runs_env = std::getenv("TRIBUTARY_FAILOVER_RUNS");
  std::mt19937 rng(seed_env != nullptr ? static_cast<unsigned>(std::stoul(seed_env)) : 20261127u);
  const int runs = runs_env != nullptr ? std::stoi(runs_env) : 48;
  int fired_runs = 0;
  for (int run = 0; run < runs; ++run) {
    const Kind kind = kKinds[run % 8];
    const int n = 2 + static_cast<int>(rng() % 7);
    const int a = static_cast<int>(rng() % static_cast<unsigned>(n));
    const int b = (a + 1 + static_cast<int>(rng() % static_cast<unsigned>(n - 1))) % n;
    const Fault fault = rng() % 2 == 0 ? Fault::kBreak : Fault::kSilence;
    const int at_send = 1 + static_cast<int>(rng() % 8);
    const std::string what = std::string(kind_name(kind)) + " n=" + std::to_string(n) +
                             " cut " + std::to_string(a) + "->" + std::to_string(b) + " at send " +
                             std::to_string(at_send) +
                             (fault == Fault::kBreak ? " (break)" : " (silence)") + ", run " +
                             std::to_string(run);
    const std::size_t blocks = static_cast<std::size_t>(n) * kCount;
    auto inputs = [&](int r) { return random_floats(r, blocks); };
    std::vector<std::vector<float>> expected(static_cast<std::size_t>(n),
                                             std::vector<float>(blocks));
    {
      MemoryFabric fabric(n);
      const auto st = testing::run_ranks(n, [&](int r) {
        return run_kind(kind, fabric.link(r), n, kCount, inputs(r),
                        expected[static_cast<std::size_t>(r)]);
      });
      for (const Status& s : st) ASSERT_TRUE(s.is_ok()) << what << ": " << s.to_string();
    }
    TwoPaths paths(n);
    std::atomic<bool> fired{false};
    std::atomic<int> drained{0};
    std::vector<std::vector<float>> out(static_cast<std::size_t>(n), std::vector<float>(blocks));
    const auto statuses = testing::run_ranks(n, [&](int r) {
      auto link = paths.link(r, std::chrono::milliseconds(200), [&](FaultPath& path, int k) {
        if (r != a || k != 0) return;
        path.fire_at(at_send, [&] {
          fired = true;
          if (fault == Fault::kBreak) {
            paths.fabric(0).fail_link(a, b);
          } else {
            paths.fabric(0).silence_link(a, b);
          }
        });
      });
      TRIB_RETURN_IF_ERROR(
          run_kind(kind, *link, n, kCount, inputs(r), out[static_cast<std::size_t>(r)]));
      algorithms::CollectiveOptions after = options_for(AllReduceAlgorithm::kAuto);
      after.seq = 4;
      TRIB_RETURN_IF_ERROR(barrier(*link, after));
      return serve_until_all_drained(*link, drained, n);
    });
    fired_runs += fired.load() ? 1 : 0;
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      ASSERT_TRUE(statuses[i].is_ok()) << what << ": rank " << r << ": " << statuses[i].to_string();
      EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), blocks * sizeof(float)), 0)
          << what << ": rank " << r << " differs from the run without the fault";
    }
    EXPECT_FALSE(paths.any_lost()) << what;
  }
  // A cut past a rank's last send on that path does not fire: most must.
  EXPECT_GE(fired_runs, runs * 3 / 4) << "too few cuts landed inside a collective";
  std::printf("%d of %d cuts landed inside a collective\n", fired_runs, runs);
}

TEST(FailoverLink, TwoMovesInOneCollective) {
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = 4099;
  const auto expected = reference(AllReduceAlgorithm::kRing, kRanks, kCount);
  TwoPaths paths(kRanks, 3);
  std::atomic<int> drained{0};
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount));
  const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(200), [&](FaultPath& path, int k) {
      if (r != 0) return;
      if (k == 0) path.fire_at(3, [&] { paths.fabric(0).fail_link(0, 1); });
      if (k == 1) path.fire_at(9, [&] { paths.fabric(1).silence_link(0, 1); });
    });
    const std::vector<float> in = random_floats(r, kCount);
    TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out[static_cast<std::size_t>(r)].data(),
                                    kCount, DType::kFloat32, ReduceOp::kSum,
                                    options_for(AllReduceAlgorithm::kRing)));
    return serve_until_all_drained(*link, drained, kRanks);
  });
  for (int r = 0; r < kRanks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    ASSERT_TRUE(statuses[i].is_ok()) << "rank " << r << ": " << statuses[i].to_string();
    EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), kCount * sizeof(float)), 0);
  }
  EXPECT_TRUE(paths.moved(0, 1, 0, 1));
  EXPECT_TRUE(paths.moved(0, 1, 1, 2) || paths.moved(1, 0, 1, 2));
  EXPECT_FALSE(paths.any_lost());
}

// A preferred path that stalls and comes back, twice: the cable is pulled mid-collective
// (what is sent is held, as TCP holds it) and put back a few collectives later. The pair
// moves to the standby, then back up once a probe is answered on the preferred path; what
// the first stint left on it (descriptors, payloads, acknowledgements delivered late) is
// told apart by its generation and dropped. Every collective gives the bits of the run
// without the fault.
struct ReturnCase {
  AllReduceAlgorithm algorithm;
  int n;
};

class PathReturns : public ::testing::TestWithParam<ReturnCase> {};

TEST_P(PathReturns, ThePairMovesBackUpAndEveryCollectiveKeepsItsBits) {
  const ReturnCase& c = GetParam();
  constexpr std::size_t kCount = 1537;
  constexpr int kCollectives = 16;
  // Held mid-collective 1, released after 4; held again before 8, released after 11.
  auto holds_before = [](int i) { return i == 8; };
  auto releases_after = [](int i) { return i == 4 || i == 11; };
  auto input = [](int r, int i) { return random_floats(r + 100 * i, kCount); };
  std::vector<std::vector<std::vector<float>>> expected;
  for (int i = 0; i < kCollectives; ++i) {
    MemoryFabric fabric(c.n);
    auto& e = expected.emplace_back(static_cast<std::size_t>(c.n), std::vector<float>(kCount));
    const auto statuses = testing::run_ranks(c.n, [&](int r) {
      const auto in = input(r, i);
      return all_reduce(fabric.link(r), in.data(), e[static_cast<std::size_t>(r)].data(), kCount,
                        DType::kFloat32, ReduceOp::kSum, options_for(c.algorithm));
    });
    for (const Status& st : statuses) ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  TwoPaths paths(c.n);
  std::atomic<int> drained{0};
  std::atomic<int> wrong{0};
  const auto statuses = testing::run_ranks(c.n, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(200), [&](FaultPath& path, int k) {
      path.jitter(std::random_device{}());
      if (r == 0 && k == 0) path.fire_at(5, [&] { paths.fabric(0).hold_link(0, 1); });
    });
    std::vector<float> out(kCount);
    for (int i = 0; i < kCollectives; ++i) {
      if (r == 0 && holds_before(i)) paths.fabric(0).hold_link(0, 1);
      const auto in = input(r, i);
      algorithms::CollectiveOptions o = options_for(c.algorithm);
      o.seq = 10 + static_cast<std::uint64_t>(i);
      TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out.data(), kCount, DType::kFloat32,
                                      ReduceOp::kSum, o));
      const auto& want = expected[static_cast<std::size_t>(i)][static_cast<std::size_t>(r)];
      if (std::memcmp(out.data(), want.data(), kCount * sizeof(float)) != 0) ++wrong;
      if (r == 0 && releases_after(i)) {
        paths.fabric(0).release_link(0, 1);
        paths.clock().advance(std::chrono::milliseconds(20));  // the next probe is due
      }
    }
    // Small all-reduces until both ends are back on the preferred path (rank 0 decides,
    // the sum tells everyone; the clock moves so that probes keep coming), bounded.
    for (int round = 0; round < 500; ++round) {
      float back = r == 0 && paths.last_to(0, 1) == 0 && paths.last_to(1, 0) == 0 ? 1.0f : 0.0f;
      algorithms::CollectiveOptions o = options_for(c.algorithm);
      o.seq = 100 + static_cast<std::uint64_t>(round);
      TRIB_RETURN_IF_ERROR(
          all_reduce(*link, &back, &back, 1, DType::kFloat32, ReduceOp::kSum, o));
      if (back > 0) break;
      if (r == 0) paths.clock().advance(std::chrono::milliseconds(5));
    }
    return serve_until_all_drained(*link, drained, c.n);
  });
  for (int r = 0; r < c.n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    ASSERT_TRUE(statuses[i].is_ok()) << "rank " << r << ": " << statuses[i].to_string();
  }
  EXPECT_EQ(wrong.load(), 0) << "collectives whose bits differ from the run without the fault";
  // How many round trips down and up depends on timing: the second hold may find the pair
  // still on the standby, and a side may follow a later move without having seen an
  // earlier one (a resume held on the path with everything else). At least one each way.
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    EXPECT_GE(paths.moves(a, b, 0, 1), 1) << "rank " << a << " to rank " << b << ": moves down";
    EXPECT_GE(paths.moves(a, b, 1, 0), 1) << "rank " << a << " to rank " << b << ": moves back up";
    EXPECT_EQ(paths.last_to(a, b), 0) << "rank " << a << " to rank " << b << ": not back up";
  }
  EXPECT_FALSE(paths.any_recovered_flag_wrong());
  EXPECT_FALSE(paths.any_lost());
}

INSTANTIATE_TEST_SUITE_P(
    SomeAlgorithms, PathReturns,
    ::testing::Values(ReturnCase{AllReduceAlgorithm::kRing, 2},
                      ReturnCase{AllReduceAlgorithm::kRing, 3},
                      ReturnCase{AllReduceAlgorithm::kTree, 3},
                      ReturnCase{AllReduceAlgorithm::kDirect, 2},
                      ReturnCase{AllReduceAlgorithm::kHalvingDoubling, 3}),
    [](const ::testing::TestParamInfo<ReturnCase>& info) {
      return std::string(to_string(info.param.algorithm)) + "_n" + std::to_string(info.param.n);
    });

// A descriptor announcing more than max_message_bytes is a broken path, not an
// allocation: with no other path the pair fails with kBadFrame at once.
TEST(FailoverLink, AnOversizedDescriptorFailsThePathWithBadFrame) {
  MemoryFabric fabric(2);
  std::vector<std::unique_ptr<PollableLink>> paths;
  paths.push_back(std::make_unique<FaultPath>(fabric.pollable(0)));
  transport::FailoverParams params;
  params.max_message_bytes = 1 << 20;
  auto made = transport::make_failover_link(params, std::move(paths));
  ASSERT_TRUE(made.is_ok());
  // Rank 1 speaks the protocol by hand: descriptor {index 0, seq 1, slot 0, check 0,
  // length 2^40, generation 0}, little-endian, under the control tag.
  std::array<std::byte, 40> descriptor{};
  descriptor[8] = std::byte{1};
  descriptor[24 + 5] = std::byte{1};
  const Tag control{~std::uint64_t{0}, 1, 0};
  ASSERT_TRUE(fabric.link(1)
                  .wait(fabric.link(1).send(0, control, descriptor),
                        Deadline::after(std::chrono::seconds(1)))
                  .is_ok());
  std::vector<std::byte> buf(64);
  const Status st =
      (*made)->wait((*made)->recv(1, Tag{1, 0, 0}, buf), Deadline::after(std::chrono::seconds(5)));
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
  EXPECT_NE(st.message().find("malformed descriptor"), std::string::npos) << st.to_string();
}

// Every path of the pair breaks: the pair fails as a plain link's would (kPeerLost, the
// peer named), at once rather than at the deadline.
// Rank 0 sends one 64-byte message to rank 1 over failover links of `paths` (stall
// deadline 200 ms), each waiting up to `deadline`: each rank's Status.
std::vector<Status> one_message(TwoPaths& paths, Duration deadline) {
  return testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(200));
    std::vector<std::byte> buf(64);
    const auto until = Deadline::after(deadline);
    const auto h = r == 0 ? link->send(1, Tag{1, 0, 0}, buf) : link->recv(0, Tag{1, 0, 0}, buf);
    return link->wait(h, until);
  });
}

TEST(FailoverLink, EveryPathGoneIsAPeerFailure) {
  TwoPaths paths(2);
  paths.fabric(0).fail_link(0, 1);
  paths.fabric(1).fail_link(0, 1);
  const auto start = std::chrono::steady_clock::now();
  const auto statuses = one_message(paths, std::chrono::seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (int r = 0; r < 2; ++r) {
    const Status& st = statuses[static_cast<std::size_t>(r)];
    EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
    EXPECT_NE(st.message().find("every path to rank " + std::to_string(1 - r)), std::string::npos)
        << st.to_string();
  }
  EXPECT_TRUE(paths.any_lost());
}

// Where paths are re-dialled (on_down, reconnects) and a grace is set, a pair whose every
// path failed waits for a new connection (FailoverParams::stranded_grace) and says so
// (on_stranded, a change to no path marked stranded). None comes: when the grace has
// passed on the link's clock, it fails as it would have at once, saying it waited.
TEST(FailoverLink, AStrandedPairFailsWhenItsGracePassesWithoutANewConnection) {
  TwoPaths paths(2);
  std::vector<std::shared_ptr<transport::ReconnectInbox>> inboxes = {
      std::make_shared<transport::ReconnectInbox>(), std::make_shared<transport::ReconnectInbox>()};
  std::atomic<int> told{0};
  paths.tune_rank = [&](int r, transport::FailoverParams& p) {
    p.stranded_grace = std::chrono::milliseconds(300);
    p.on_down = [](int, int) {};  // re-dialled by nobody: no new connection comes
    p.reconnects = inboxes[static_cast<std::size_t>(r)];
    p.on_stranded = [&told, r](int peer) {
      if (peer == 1 - r) ++told;
    };
  };
  paths.fabric(0).fail_link(0, 1);
  paths.fabric(1).fail_link(0, 1);
  const auto statuses = one_message(paths, std::chrono::seconds(20));
  for (int r = 0; r < 2; ++r) {
    const Status& st = statuses[static_cast<std::size_t>(r)];
    EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
    EXPECT_NE(st.message().find("no new connection within 300 ms"), std::string::npos)
        << st.to_string();
  }
  EXPECT_EQ(told.load(), 2);
  EXPECT_TRUE(paths.any_stranded());
  EXPECT_TRUE(paths.any_lost());
}

// The same wait, ended at once by whoever re-dials finding the peer gone
// (Reconnection::gone, as the agent's knock posts it): not after the grace.
TEST(FailoverLink, AGoneNoticeEndsAStrandedPairsWaitAtOnce) {
  TwoPaths paths(2);
  std::vector<std::shared_ptr<transport::ReconnectInbox>> inboxes = {
      std::make_shared<transport::ReconnectInbox>(), std::make_shared<transport::ReconnectInbox>()};
  paths.tune_rank = [&](int r, transport::FailoverParams& p) {
    p.stranded_grace = std::chrono::hours(1);
    p.on_down = [](int, int) {};
    auto inbox = inboxes[static_cast<std::size_t>(r)];
    p.reconnects = inbox;
    p.on_stranded = [inbox](int peer) {
      transport::Reconnection gone;
      gone.peer = peer;
      gone.gone = error(StatusCode::kPeerLost, "test: nothing listens there");
      inbox->post(std::move(gone));
    };
  };
  paths.fabric(0).fail_link(0, 1);
  paths.fabric(1).fail_link(0, 1);
  const auto start = std::chrono::steady_clock::now();
  const auto statuses = one_message(paths, std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (int r = 0; r < 2; ++r) {
    const Status& st = statuses[static_cast<std::size_t>(r)];
    EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
    EXPECT_NE(st.message().find("test: nothing listens there"), std::string::npos)
        << st.to_string();
  }
  EXPECT_TRUE(paths.any_stranded());
}

// Rank 0's standby never connected (an absent path: transport/absent_path.h) while the
// others' did: every rank still speaks the failover protocol on the preferred path, so the
// collectives are those of a plain link; and when rank 0's preferred path to rank 1 then
// breaks, that pair has nowhere to go and fails as a peer failure, at once, on both ends.
TEST(FailoverLink, AStandbyThatNeverConnectedIsNoPathButTheSameProtocol) {
  constexpr int kN = 3;
  constexpr std::size_t kCount = 1537;
  const auto expected = reference(AllReduceAlgorithm::kRing, kN, kCount);
  MemoryFabric preferred(kN), standby(kN);
  // As over TCP: the member whose standby group did not form closed the connections it had
  // made to the others' standby listeners, so their standby to it is gone too.
  standby.fail_link(0, 1);
  standby.fail_link(0, 2);
  auto link_of = [&](int r) {
    std::vector<std::unique_ptr<PollableLink>> paths;
    paths.push_back(std::make_unique<FaultPath>(preferred.pollable(r)));
    if (r == 0) {
      paths.push_back(transport::make_absent_path(
          r, kN, error(StatusCode::kUnavailable, "standby not connected")));
    } else {
      paths.push_back(std::make_unique<FaultPath>(standby.pollable(r)));
    }
    transport::FailoverParams params;
    params.epoch = 1;
    auto made = transport::make_failover_link(std::move(params), std::move(paths));
    EXPECT_TRUE(made.is_ok());
    return std::move(*made);
  };
  std::vector<std::vector<float>> out(kN, std::vector<float>(kCount));
  std::atomic<int> broken{0};
  const auto start = std::chrono::steady_clock::now();
  const auto statuses = testing::run_ranks(kN, [&](int r) -> Status {
    auto link = link_of(r);
    const std::vector<float> in = random_floats(r, kCount);
    TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out[static_cast<std::size_t>(r)].data(),
                                    kCount, DType::kFloat32, ReduceOp::kSum,
                                    options_for(AllReduceAlgorithm::kRing)));
    if (++broken == kN) preferred.fail_link(0, 1);  // after everyone's first collective
    while (broken.load() < kN) std::this_thread::yield();
    if (r == 2) return Status();
    std::vector<std::byte> buf(64);
    const auto h = r == 0 ? link->send(1, Tag{9, 0, 0}, buf) : link->recv(0, Tag{9, 0, 0}, buf);
    return link->wait(h, Deadline::after(std::chrono::seconds(10)));
  });
  for (int r = 0; r < kN; ++r) {
    EXPECT_EQ(std::memcmp(out[static_cast<std::size_t>(r)].data(),
                          expected[static_cast<std::size_t>(r)].data(), kCount * sizeof(float)),
              0)
        << "rank " << r;
  }
  EXPECT_TRUE(statuses[2].is_ok()) << statuses[2].to_string();
  for (int r : {0, 1}) {
    EXPECT_EQ(statuses[static_cast<std::size_t>(r)].code(), StatusCode::kPeerLost)
        << "rank " << r << ": " << statuses[static_cast<std::size_t>(r)].to_string();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
      << "a pair with no standby waited for one";
}

// A peer killed (every path resets): one failure, kPeerLost, no move left dangling.
TEST(FailoverLink, DeadPeerFailsThePairOnce) {
  TwoPaths paths(2);
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(200));
    if (r == 1) {
      paths.fabric(0).kill(1);
      paths.fabric(1).kill(1);
      return Status();
    }
    std::vector<std::byte> buf(64);
    return link->wait(link->recv(1, Tag{1, 0, 0}, buf), Deadline::after(std::chrono::seconds(10)));
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kPeerLost) << statuses[0].to_string();
}

// A peer that sent its last message and closed every path (a member that returned from
// a collective and dropped its links for the next view) leaves that message deliverable,
// as a plain link delivers what arrived before a close: a receive posted after the pair
// was lost still takes it; only one for a message that never came fails.
TEST(FailoverLink, WhatArrivedBeforeEveryPathClosedIsStillDelivered) {
  TwoPaths paths(2);
  std::atomic<bool> sent{false};
  std::vector<std::byte> got(64), none(64);
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(200));
    const auto deadline = Deadline::after(std::chrono::seconds(10));
    if (r == 1) {
      std::vector<std::byte> message(64, std::byte{42});
      TRIB_RETURN_IF_ERROR(link->wait(link->send(0, Tag{1, 0, 0}, message), deadline));
      // Both connections close (what was sent stays readable, as with TCP's FIN).
      paths.fabric(0).fail_link(0, 1);
      paths.fabric(1).fail_link(0, 1);
      sent = true;
      return Status();
    }
    while (!sent) std::this_thread::yield();
    // The failure is seen while this receive waits; the message is already whole.
    const Status other = link->wait(link->recv(1, Tag{2, 0, 0}, none), deadline);
    if (other.code() != StatusCode::kPeerLost) {
      return error(StatusCode::kInternal, "the other receive: " + other.to_string());
    }
    TRIB_RETURN_IF_ERROR(link->wait(link->recv(1, Tag{1, 0, 0}, got), deadline));
    const Status later = link->wait(link->recv(1, Tag{3, 0, 0}, none), deadline);
    if (later.code() != StatusCode::kPeerLost) {
      return error(StatusCode::kInternal, "a later receive: " + later.to_string());
    }
    return Status();
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(got, std::vector<std::byte>(64, std::byte{42}));
}

// The last path going silent is not a path failure: the caller's deadline decides
// (kTimedOut, then today's member-failure protocol), and nothing hangs.
TEST(FailoverLink, SilentLastPathEndsAtTheCallersDeadline) {
  TwoPaths paths(2);
  const auto statuses = testing::run_ranks(2, [&](int r) -> Status {
    auto link = paths.link(r, std::chrono::milliseconds(50));
    if (r == 1) return Status();  // rank 1 never sends
    paths.fabric(0).silence_link(0, 1);
    paths.fabric(1).silence_link(0, 1);
    std::vector<std::byte> buf(64);
    const auto send = link->send(1, Tag{1, 0, 0}, buf);
    TRIB_RETURN_IF_ERROR(link->wait(send, Deadline::after(std::chrono::seconds(5))));
    return link->wait(link->recv(1, Tag{2, 0, 0}, buf),
                      Deadline::after(std::chrono::milliseconds(300)));
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimedOut) << statuses[0].to_string();
  EXPECT_TRUE(paths.moved(0, 1));
  EXPECT_FALSE(paths.any_lost());
}

// Two "hosts" of two ranks each.
bool same_host(int a, int b) { return a / 2 == b / 2; }

// Paths per pair (FailoverParams::path_peers): with four ranks on two "hosts", the pairs
// inside a host run on path 0 and the others on path 1 from the start. Path 0 between
// hosts is silent (a link there would be a pulled cable), so a pair that used it would
// stall and move: nobody moves, and every algorithm gives the bits of a plain link; also
// when the paths combine receives (the cross-host pairs then combine from a buffer on a
// path that is not the link's first). Then a cut on path 0 inside a host moves only that
// pair, to path 1, mid-collective.
TEST(FailoverLink, PathsPerPairStartEachPairOnTheFirstPathThatCarriesIt) {
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 2053;
  const AllReduceAlgorithm algorithms[] = {
      AllReduceAlgorithm::kRing, AllReduceAlgorithm::kTree, AllReduceAlgorithm::kDoubleTree,
      AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kDirect};
  for (AllReduceAlgorithm algorithm : algorithms) {
    for (bool combining : {false, true}) {
      for (bool cut : {false, true}) {
        const std::string what = std::string(to_string(algorithm)) +
                                 (combining ? " combining" : "") + (cut ? " with a cut" : "");
        const auto expected = reference(algorithm, kRanks, kCount, combining);
        TwoPaths paths(kRanks, 2, combining);
        paths.fabric(1).set_combining(false);  // only path 0 reduces as it receives
        for (int a = 0; a < kRanks; ++a) {
          for (int b = a + 1; b < kRanks; ++b) {
            if (!same_host(a, b)) paths.fabric(0).silence_link(a, b);
          }
        }
        std::atomic<bool> fired{false};
        std::atomic<int> drained{0};
        std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount));
        const auto statuses = testing::run_ranks(kRanks, [&](int r) {
          std::unique_ptr<algorithms::Link> link;
          {
            std::vector<std::unique_ptr<PollableLink>> made;
            for (int k = 0; k < 2; ++k) {
              auto path = std::make_unique<FaultPath>(paths.fabric(k).pollable(r), &paths.clock());
              if (cut && r == 0 && k == 0) {
                path->fire_at(3, [&] {
                  fired = true;
                  paths.fabric(0).fail_link(0, 1);
                });
              }
              made.push_back(std::move(path));
            }
            transport::FailoverParams params;
            params.epoch = 1;
            params.path_names = {"shm", "tcp"};
            params.stall_deadline = std::chrono::milliseconds(200);
            params.clock = &paths.clock();
            params.path_peers.assign(2, std::vector<bool>(kRanks, true));
            for (int peer = 0; peer < kRanks; ++peer) {
              params.path_peers[0][static_cast<std::size_t>(peer)] = same_host(r, peer);
            }
            params.on_change = [&paths, r](const transport::PathChange& c) { paths.note(r, c); };
            auto link_or = transport::make_failover_link(std::move(params), std::move(made));
            if (!link_or.is_ok()) return link_or.status();
            link = std::move(*link_or);
          }
          const std::vector<float> in = random_floats(r, kCount);
          TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out[static_cast<std::size_t>(r)].data(),
                                          kCount, DType::kFloat32, ReduceOp::kSum,
                                          options_for(algorithm)));
          algorithms::CollectiveOptions after = options_for(algorithm);
          after.seq = 4;
          TRIB_RETURN_IF_ERROR(barrier(*link, after));
          return serve_until_all_drained(*link, drained, kRanks);
        });
        for (int r = 0; r < kRanks; ++r) {
          const auto i = static_cast<std::size_t>(r);
          ASSERT_TRUE(statuses[i].is_ok())
              << what << ": rank " << r << ": " << statuses[i].to_string();
          EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), kCount * sizeof(float)), 0)
              << what << ": rank " << r << " differs from a plain link";
        }
        if (cut && fired.load()) {
          EXPECT_TRUE(paths.moved(0, 1)) << what;
          EXPECT_TRUE(paths.moved(1, 0)) << what;
          EXPECT_EQ(paths.changes(), 2u) << what << ": a pair other than 0-1 moved";
        } else {
          EXPECT_EQ(paths.changes(), 0u) << what << ": a pair moved without a fault";
        }
        EXPECT_FALSE(paths.any_lost()) << what;
      }
    }
  }
}

}  // namespace
}  // namespace tributary
