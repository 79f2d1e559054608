// FailoverLink over the real transports, ranks as threads: a pair's preferred path is cut
// mid-collective (its link aborted, as when its connection or segment dies: the peer gets
// the abort notice, the connections shut) and the pair carries on over the next path.
// Shared memory then TCP (a segment per pair, a loopback connection per pair), and TCP
// then TCP (two endpoints per rank, standing in for two addresses). Every all-reduce
// algorithm; the result must equal, bit for bit, the same algorithm over TCP alone.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include "agent/data_plane.h"
#include "agent/path_redialer.h"
#include "transport/tcp/tcp_endpoint.h"
#include "agent/worker.h"
#include "algorithms/collectives.h"
#include "tests/agent/tcp_test_util.h"
#include "tests/support/fault_path.h"
#include "tests/support/rank_threads.h"
#include "tests/transport/shm_test_util.h"
#include "transport/failover_link.h"

namespace tributary {
namespace {

using algorithms::AllReduceAlgorithm;

enum class Preferred { kShm, kTcp };

// Whether a member keeps standby paths (WorkerConfig::failover) without being told: where
// it has another network to fall back to (here, a second data address), and not with one
// address, where a standby would be a second connection on the same wire; --failover and
// --no-failover decide it either way. What it advertises is what its groups will use.
bool advertises_standby(transport::PathChoice choice, int addresses) {
  agent::WorkerConfig config;
  config.bind_host = "127.0.0.1";
  config.secret = "failover-default-test";
  config.transport = "tcp";
  config.failover = choice;
  for (int i = 0; i < addresses; ++i) config.data_addresses.push_back("127.0.0.1");
  auto plane_config = agent::DataPlaneConfig::of(config);
  EXPECT_TRUE(plane_config.is_ok()) << plane_config.status().to_string();
  if (!plane_config.is_ok()) return false;
  auto plane = agent::DataPlane::start(*plane_config, Logger("test"));
  EXPECT_TRUE(plane.is_ok()) << plane.status().to_string();
  if (!plane.is_ok()) return false;
  for (const std::string& advert : (*plane)->capabilities()) {
    if (advert.rfind("tcp-standby", 0) == 0) return true;
  }
  return false;
}

TEST(FailoverDefault, OnWithASecondNetworkOffWithOneAndTheFlagsDecideEitherWay) {
  using transport::PathChoice;
  EXPECT_FALSE(advertises_standby(PathChoice::kAuto, 1));
  EXPECT_TRUE(advertises_standby(PathChoice::kAuto, 2));
  EXPECT_TRUE(advertises_standby(PathChoice::kOn, 1));
  EXPECT_FALSE(advertises_standby(PathChoice::kOff, 2));
  EXPECT_EQ(agent::WorkerConfig{}.failover, PathChoice::kAuto);
}

std::vector<float> random_floats(int rank, std::size_t count) {
  std::mt19937 gen(static_cast<unsigned>(77 + rank));
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

algorithms::CollectiveOptions options_for(AllReduceAlgorithm algorithm, std::uint64_t seq) {
  algorithms::CollectiveOptions o;
  o.seq = seq;
  o.algorithm = algorithm;
  o.chunk_bytes = 4096;
  o.deadline = Deadline::after(std::chrono::seconds(30));
  return o;
}

// One TCP group per epoch over fresh endpoints: a rank's links, by rank.
std::vector<std::unique_ptr<algorithms::Link>> tcp_group(int n, testing::LogCapture& logs) {
  testing::Cluster c = testing::make_cluster(n, logs);
  for (const Status& st : testing::connect_all(c, 1)) EXPECT_TRUE(st.is_ok()) << st.to_string();
  return std::move(c.links);
}

struct Case {
  AllReduceAlgorithm algorithm;
  int n;
  Preferred preferred;
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  return std::string(to_string(info.param.algorithm)) + "_n" + std::to_string(info.param.n) +
         (info.param.preferred == Preferred::kShm ? "_shm_to_tcp" : "_tcp_to_tcp");
}

class FailoverOverTransports : public ::testing::TestWithParam<Case> {};

TEST_P(FailoverOverTransports, CutPreferredPathMidCollectiveSameBits) {
  const Case& c = GetParam();
  constexpr std::size_t kCount = (256 << 10) / sizeof(float) + 3;  // 256 KiB and an odd tail
  testing::LogCapture logs;

  // The reference: the same algorithm over plain TCP links.
  std::vector<std::vector<float>> expected(static_cast<std::size_t>(c.n),
                                           std::vector<float>(kCount));
  {
    auto plain = tcp_group(c.n, logs);
    const auto statuses = testing::run_ranks(c.n, [&](int r) {
      const auto in = random_floats(r, kCount);
      return all_reduce(*plain[static_cast<std::size_t>(r)], in.data(),
                        expected[static_cast<std::size_t>(r)].data(), kCount, DType::kFloat32,
                        ReduceOp::kSum, options_for(c.algorithm, 1));
    });
    for (const Status& st : statuses) ASSERT_TRUE(st.is_ok()) << st.to_string();
  }

  std::vector<std::unique_ptr<algorithms::Link>> preferred;
  if (c.preferred == Preferred::kShm) {
    testing::ShmGroup g = testing::make_shm_group(c.n, 1 << 16);
    ASSERT_EQ(g.links.size(), static_cast<std::size_t>(c.n));
    preferred = std::move(g.links);
  } else {
    preferred = tcp_group(c.n, logs);
  }
  auto standby = tcp_group(c.n, logs);
  std::atomic<int> moves{0};
  std::atomic<bool> fired{false};
  std::atomic<int> drained{0};
  std::vector<std::vector<float>> out(static_cast<std::size_t>(c.n), std::vector<float>(kCount));
  const auto statuses = testing::run_ranks(c.n, [&](int r) -> Status {
    const auto i = static_cast<std::size_t>(r);
    std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
    TRIB_ASSIGN_OR_RETURN(auto first, transport::as_path(std::move(preferred[i])));
    TRIB_ASSIGN_OR_RETURN(auto second, transport::as_path(std::move(standby[i])));
    auto cut = std::make_unique<testing::FaultPath>(std::move(first));
    if (r == 0) {
      // Rank 0's preferred path dies at its 6th send there (a descriptor or a payload:
      // mid-collective), or, for the direct algorithm's one message per peer, its 2nd.
      testing::FaultPath* self = cut.get();
      const int at = c.algorithm == AllReduceAlgorithm::kDirect ? 2 : 6;
      cut->fire_at(at, [self, &fired] {
        fired = true;
        self->inner().abort(error(StatusCode::kPeerLost, "test: the preferred path was cut"));
      });
    }
    paths.push_back(std::move(cut));
    paths.push_back(std::move(second));
    transport::FailoverParams params;
    params.epoch = 1;
    params.path_names = {c.preferred == Preferred::kShm ? "shm" : "tcp:first", "tcp:second"};
    params.on_change = [&](const transport::PathChange& change) {
      if (change.from == 0 && change.to == 1) ++moves;
    };
    TRIB_ASSIGN_OR_RETURN(auto link, transport::make_failover_link(params, std::move(paths)));
    const auto in = random_floats(r, kCount);
    TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out[i].data(), kCount, DType::kFloat32,
                                    ReduceOp::kSum, options_for(c.algorithm, 1)));
    TRIB_RETURN_IF_ERROR(barrier(*link, options_for(c.algorithm, 2)));
    TRIB_RETURN_IF_ERROR(transport::drain(*link, Deadline::after(std::chrono::seconds(10))));
    ++drained;
    const auto give_up = Deadline::after(std::chrono::seconds(10));
    while (drained.load() < c.n && !give_up.passed()) {
      std::this_thread::yield();
      TRIB_RETURN_IF_ERROR(transport::drain(*link, Deadline::after(std::chrono::milliseconds(1))));
    }
    return Status();
  });
  ASSERT_TRUE(fired.load()) << "the cut never happened";
  for (int r = 0; r < c.n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    ASSERT_TRUE(statuses[i].is_ok()) << "rank " << r << ": " << statuses[i].to_string() << "\n"
                                     << logs.dump();
    EXPECT_EQ(std::memcmp(out[i].data(), expected[i].data(), kCount * sizeof(float)), 0)
        << "rank " << r << " differs from the run without the fault";
  }
  // Rank 0 moved every pair (its whole preferred link died), each peer followed.
  EXPECT_GE(moves.load(), 2 * (c.n - 1));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (AllReduceAlgorithm a :
       {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kTree, AllReduceAlgorithm::kDoubleTree,
        AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kDirect}) {
    for (int n : {2, 3}) {
      for (Preferred p : {Preferred::kShm, Preferred::kTcp}) out.push_back({a, n, p});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, FailoverOverTransports, ::testing::ValuesIn(cases()),
                         name_of);

// A peer that closes every path right after its last send (a member leaving at a step
// boundary): what it sent before the close is still delivered, to a receive posted late,
// as a plain link delivers what arrived before an EOF. (The failover link's own receives,
// always posted, used to fail the pair on the close before the payload was read.)
TEST(FailoverOverTransportsClose, WhatWasSentBeforeTheCloseIsDelivered) {
  testing::LogCapture logs;
  for (Preferred preferred : {Preferred::kShm, Preferred::kTcp}) {
    std::vector<std::unique_ptr<algorithms::Link>> first;
    if (preferred == Preferred::kShm) {
      first = std::move(testing::make_shm_group(2, 1 << 16).links);
    } else {
      first = tcp_group(2, logs);
    }
    ASSERT_EQ(first.size(), 2u);
    auto standby = tcp_group(2, logs);
    std::vector<std::unique_ptr<algorithms::Link>> links;
    for (std::size_t i = 0; i < 2; ++i) {
      std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
      auto a = transport::as_path(std::move(first[i]));
      auto b = transport::as_path(std::move(standby[i]));
      ASSERT_TRUE(a.is_ok() && b.is_ok());
      paths.push_back(std::move(*a));
      paths.push_back(std::move(*b));
      transport::FailoverParams params;
      params.epoch = 1;
      auto link = transport::make_failover_link(params, std::move(paths));
      ASSERT_TRUE(link.is_ok());
      links.push_back(std::move(*link));
    }
    const std::vector<std::byte> sent(1000, std::byte{7});  // fits a ring: no reader needed
    std::vector<std::byte> got(sent.size());
    const auto deadline = Deadline::after(std::chrono::seconds(10));
    ASSERT_TRUE(links[1]->wait(links[1]->send(0, {5, 1, 0}, sent), deadline).is_ok());
    links[1].reset();  // gone, every path closed, before rank 0 posted its receive
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the close lands first
    const Status st = links[0]->wait(links[0]->recv(1, {5, 1, 0}, got), deadline);
    EXPECT_TRUE(st.is_ok()) << (preferred == Preferred::kShm ? "shm: " : "tcp: ")
                            << st.to_string();
    EXPECT_EQ(got, sent);
  }
}

// Reconnect: the connection of one pair's preferred TCP path is shut down mid-collective
// (both ends see it close: an error, not a stall). The pair moves to its standby, both
// ends re-dial the preferred path in the background (agent/path_redialer.h, the lower rank
// dialling with the cluster's handshake), the link puts the new connection in, probes it,
// and the pair moves back up, with no view change and the same bits in every round.
//
// StandbyFirst: the pair's standby connection is shut down first, while the pair is on its
// preferred path: the standby is re-dialled and is up again (no move), so that when the
// preferred connection is shut down later the pair has somewhere to go (without the
// standby's reconnect it would lose its last path and fail), and comes back up from there.
class FailoverReconnect : public ::testing::TestWithParam<bool> {};

// The reference: each rank's result of a ring all-reduce of random_floats over plain TCP.
std::vector<std::vector<float>> plain_tcp_sums(int ranks, std::size_t count,
                                               testing::LogCapture& logs) {
  std::vector<std::vector<float>> expected(static_cast<std::size_t>(ranks),
                                           std::vector<float>(count));
  auto plain = tcp_group(ranks, logs);
  const auto statuses = testing::run_ranks(ranks, [&](int r) {
    const auto in = random_floats(r, count);
    return all_reduce(*plain[static_cast<std::size_t>(r)], in.data(),
                      expected[static_cast<std::size_t>(r)].data(), count, DType::kFloat32,
                      ReduceOp::kSum, options_for(AllReduceAlgorithm::kRing, 1));
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  return expected;
}

// Each rank's one address on `c`, by rank (what a PathRedialer dials).
std::vector<std::vector<std::string>> one_address_each(const testing::Cluster& c) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& a : c.addresses) out.push_back({a});
  return out;
}

// The path changes every rank's link reported (FailoverParams::on_change), from any thread.
class PathChanges {
 public:
  void add(int rank, const transport::PathChange& c) {
    std::lock_guard lock(mu_);
    if (!ending_) changes_.push_back({rank, c});
  }
  // From now on the closes of the end (the first rank done lets its link go) are not kept.
  void end() {
    std::lock_guard lock(mu_);
    ending_ = true;
  }
  bool moved(int r, int peer, int from, int to) const {
    std::lock_guard lock(mu_);
    return std::any_of(changes_.begin(), changes_.end(), [&](const auto& c) {
      return c.first == r && c.second.peer == peer && c.second.from == from && c.second.to == to;
    });
  }
  // Whether rank r's pair with `peer` waited for a new connection (every path failed).
  bool stranded(int r, int peer) const {
    std::lock_guard lock(mu_);
    return std::any_of(changes_.begin(), changes_.end(), [&](const auto& c) {
      return c.first == r && c.second.peer == peer && c.second.stranded && c.second.to == -1;
    });
  }
  // Where the last move of rank r's pair with `peer` went (-1: none, or the pair failed).
  int last_to(int r, int peer) const {
    std::lock_guard lock(mu_);
    int to = -1;
    for (const auto& c : changes_) {
      if (c.first == r && c.second.peer == peer) to = c.second.to;
    }
    return to;
  }
  int moves_of(int r, int peer) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(changes_.begin(), changes_.end(), [&](const auto& c) {
      return c.first == r && c.second.peer == peer;
    }));
  }

 private:
  mutable std::mutex mu_;
  bool ending_ = false;
  std::vector<std::pair<int, transport::PathChange>> changes_;
};

// Failover parameters for rank `r` of a reconnect test: paths named first and second,
// changes into `changes`, failed paths wanted by `redialer` for epoch 1.
transport::FailoverParams reconnect_params(int r, PathChanges& changes,
                                           agent::PathRedialer& redialer,
                                           std::shared_ptr<transport::ReconnectInbox> inbox,
                                           testing::LogCapture& logs) {
  transport::FailoverParams params;
  params.epoch = 1;
  params.path_names = {"tcp:first", "tcp:second"};
  params.on_change = [&changes, r](const transport::PathChange& c) { changes.add(r, c); };
  params.log = logs.logger("[link " + std::to_string(r) + "] ");
  params.reconnects = std::move(inbox);
  params.on_down = [&redialer](int path, int peer) { redialer.want(1, path, peer); };
  return params;
}

// A ring all-reduce of rank r's random_floats on `link` a round, each result checked
// against `expected` (a mismatch counted in *bad), until rank 0 finds `done()` (or 30 s
// have passed) and tells every rank so. `before(round)` runs at the start of each round.
// Returns the rounds run.
Result<int> reduce_rounds(algorithms::Link& link, int r, const std::vector<float>& expected,
                          int* bad, const std::function<void(std::uint64_t)>& before,
                          const std::function<bool()>& done) {
  const auto in = random_floats(r, expected.size());
  std::vector<float> out(expected.size());
  const auto give_up = Deadline::after(std::chrono::seconds(30));
  for (std::uint64_t round = 0;; ++round) {
    before(round);
    TRIB_RETURN_IF_ERROR(all_reduce(link, in.data(), out.data(), in.size(), DType::kFloat32,
                                    ReduceOp::kSum,
                                    options_for(AllReduceAlgorithm::kRing, 10 + 2 * round)));
    if (std::memcmp(out.data(), expected.data(), in.size() * sizeof(float)) != 0) ++*bad;
    std::uint8_t go_on = r == 0 && !done() && !give_up.passed();
    std::uint8_t decided = 0;
    TRIB_RETURN_IF_ERROR(broadcast(link, &go_on, &decided, 1, DType::kUInt8, 0,
                                   options_for(AllReduceAlgorithm::kRing, 11 + 2 * round)));
    if (decided == 0) return static_cast<int>(round + 1);
  }
}

// A PathRedialer per rank, by rank.
std::vector<std::unique_ptr<agent::PathRedialer>> redialer_each(int ranks,
                                                                testing::LogCapture& logs) {
  std::vector<std::unique_ptr<agent::PathRedialer>> out;
  for (int r = 0; r < ranks; ++r) {
    out.push_back(std::make_unique<agent::PathRedialer>(logs.logger("[redial] ")));
  }
  return out;
}

// Every link stays up until all have drained: a link that goes away closes its paths.
Status drain_together(algorithms::Link& link, std::atomic<int>& drained, int ranks) {
  TRIB_RETURN_IF_ERROR(transport::drain(link, Deadline::after(std::chrono::seconds(10))));
  ++drained;
  const auto wait_for_all = Deadline::after(std::chrono::seconds(10));
  while (drained.load() < ranks && !wait_for_all.passed()) {
    std::this_thread::yield();
    TRIB_RETURN_IF_ERROR(transport::drain(link, Deadline::after(std::chrono::milliseconds(1))));
  }
  return Status();
}

// Two TCP networks of one group (epoch 1), each a listening cluster, and a PathRedialer per
// rank over both: the setting of the reconnect and stranded-pair tests.
struct TwoNetworks {
  TwoNetworks(int ranks, testing::LogCapture& logs)
      : first(testing::make_cluster(ranks, logs)),
        second(testing::make_cluster(ranks, logs)),
        first_addresses(one_address_each(first)),
        second_addresses(one_address_each(second)),
        redialers(redialer_each(ranks, logs)) {}
  // Connects the group on both networks; every rank's Status, both networks'.
  std::vector<Status> connect() {
    std::vector<Status> all = testing::connect_all(first, 1);
    for (Status& st : testing::connect_all(second, 1)) all.push_back(std::move(st));
    return all;
  }
  // Rank 0's side of its connection to rank 1 on a network (it dialled rank 1's listener).
  static int socket_to_rank1(const testing::Cluster& c) {
    return testing::socket_to_port(testing::port_of(c.addresses[1]));
  }
  // Rank r's failover paths, [first, second], the first in a FaultPath (`*cut`, for
  // fire_at), and its redialer started on both for epoch 1, into `*inbox`.
  Result<std::vector<std::unique_ptr<algorithms::PollableLink>>> paths_of(
      int r, std::shared_ptr<transport::ReconnectInbox>* inbox, testing::FaultPath** cut) {
    const auto i = static_cast<std::size_t>(r);
    *inbox = std::make_shared<transport::ReconnectInbox>();
    redialers[i]->start(1, r,
                        {{first.endpoints[i].get(), first_addresses},
                         {second.endpoints[i].get(), second_addresses}},
                        {}, *inbox);
    std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
    TRIB_ASSIGN_OR_RETURN(auto a, transport::as_path(std::move(first.links[i])));
    TRIB_ASSIGN_OR_RETURN(auto b, transport::as_path(std::move(second.links[i])));
    auto wrapped = std::make_unique<testing::FaultPath>(std::move(a));
    *cut = wrapped.get();
    paths.push_back(std::move(wrapped));
    paths.push_back(std::move(b));
    return paths;
  }

  testing::Cluster first;
  testing::Cluster second;
  std::vector<std::vector<std::string>> first_addresses;
  std::vector<std::vector<std::string>> second_addresses;
  std::vector<std::unique_ptr<agent::PathRedialer>> redialers;
};

TEST_P(FailoverReconnect, AClosedPathIsRedialledAndThePairMovesBackUp) {
  const bool standby_first = GetParam();
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = (64 << 10) / sizeof(float) + 3;
  testing::LogCapture logs;
  const auto expected = plain_tcp_sums(kRanks, kCount, logs);
  TwoNetworks nets(kRanks, logs);
  for (const Status& st : nets.connect()) ASSERT_TRUE(st.is_ok()) << st.to_string();
  const int cut_fd = TwoNetworks::socket_to_rank1(nets.first);
  ASSERT_GE(cut_fd, 0);
  const int standby_fd = TwoNetworks::socket_to_rank1(nets.second);
  ASSERT_GE(standby_fd, 0);

  PathChanges changes;
  auto& redialers = nets.redialers;
  std::atomic<bool> fired{false};
  std::atomic<int> drained{0};
  int rounds = 0;
  std::vector<int> bad_rounds(kRanks, 0);
  const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
    const auto i = static_cast<std::size_t>(r);
    std::shared_ptr<transport::ReconnectInbox> inbox;
    testing::FaultPath* cut = nullptr;
    TRIB_ASSIGN_OR_RETURN(auto paths, nets.paths_of(r, &inbox, &cut));
    if (r == 0 && !standby_first) {
      cut->fire_at(40, [&fired, cut_fd] {  // mid-collective: the 40th send on it
        fired = true;
        ::shutdown(cut_fd, SHUT_RDWR);
      });
    }
    transport::FailoverParams params = reconnect_params(r, changes, *redialers[i], inbox, logs);
    params.probe_interval = std::chrono::milliseconds(20);
    TRIB_ASSIGN_OR_RETURN(auto link, transport::make_failover_link(params, std::move(paths)));
    bool standby_cut = false;
    auto cuts = [&](std::uint64_t round) {
      if (r != 0 || !standby_first) return;
      // Between rounds: the standby first; the preferred path once both ends of the pair
      // have put a new standby connection in.
      if (round == 2) {
        ::shutdown(standby_fd, SHUT_RDWR);
        standby_cut = true;
      } else if (standby_cut && !fired && redialers[0]->reconnects() == 1 &&
                 redialers[1]->reconnects() == 1) {
        fired = true;
        ::shutdown(cut_fd, SHUT_RDWR);
      }
    };
    // Rank 0 says when to stop: once both ends of the cut pair are back up.
    auto back_up = [&] { return changes.moved(0, 1, 1, 0) && changes.moved(1, 0, 1, 0); };
    TRIB_ASSIGN_OR_RETURN(const int ran,
                          reduce_rounds(*link, r, expected[i], &bad_rounds[i], cuts, back_up));
    if (r == 0) rounds = ran;
    changes.end();
    return drain_together(*link, drained, kRanks);
  });
  ASSERT_TRUE(fired.load()) << "the cut never happened";
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << "rank " << r << ": " << statuses[static_cast<std::size_t>(r)].to_string() << "\n"
        << logs.dump();
    EXPECT_EQ(bad_rounds[static_cast<std::size_t>(r)], 0) << "rank " << r;
  }
  EXPECT_TRUE(changes.moved(0, 1, 0, 1) && changes.moved(1, 0, 0, 1)) << logs.dump();
  EXPECT_TRUE(changes.moved(0, 1, 1, 0) && changes.moved(1, 0, 1, 0)) << "never back up\n"
                                                                      << logs.dump();
  const std::uint64_t made = standby_first ? 2 : 1;  // the standby's, then the preferred's
  EXPECT_EQ(redialers[0]->reconnects(), made);
  EXPECT_EQ(redialers[1]->reconnects(), made);
  EXPECT_EQ(redialers[2]->reconnects(), 0u);
  // Neither end left its path for the standby's failure: one move down, one back up.
  EXPECT_EQ(changes.moves_of(0, 1), 2);
  EXPECT_EQ(changes.moves_of(1, 0), 2);
  // The other pairs never moved.
  EXPECT_FALSE(changes.moved(0, 2, 0, 1) || changes.moved(2, 0, 0, 1) ||
               changes.moved(1, 2, 0, 1) || changes.moved(2, 1, 0, 1));
  EXPECT_TRUE(logs.contains("reconnected")) << logs.dump();
  std::printf("back up after %d rounds\n", rounds);
}

// A standby that did not connect at the view's start (here: never dialled at all) is a
// link without connections (TcpEndpoint::unconnected_link): every pair finds it down at
// once, re-dials it in the background, and, once both ends put the new connection in,
// can move to it: a cut of the preferred path then costs no failure.
TEST(FailoverReconnect, AStandbyThatNeverConnectedIsDialledLaterAndCarriesThePairs) {
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = (64 << 10) / sizeof(float) + 3;
  testing::LogCapture logs;
  const auto expected = plain_tcp_sums(kRanks, kCount, logs);
  testing::Cluster first = testing::make_cluster(kRanks, logs);
  testing::Cluster second = testing::make_cluster(kRanks, logs);  // listening, never connected
  for (const Status& st : testing::connect_all(first, 1)) ASSERT_TRUE(st.is_ok()) << st.to_string();
  const auto first_addresses = one_address_each(first);
  const auto second_addresses = one_address_each(second);
  const int cut_fd = testing::socket_to_port(testing::port_of(first.addresses[1]));
  ASSERT_GE(cut_fd, 0);

  PathChanges changes;
  auto redialers = redialer_each(kRanks, logs);
  std::atomic<bool> fired{false};
  std::atomic<int> drained{0};
  std::vector<int> bad_rounds(kRanks, 0);
  const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
    const auto i = static_cast<std::size_t>(r);
    auto inbox = std::make_shared<transport::ReconnectInbox>();
    redialers[i]->start(1, r,
                        {{first.endpoints[i].get(), first_addresses},
                         {second.endpoints[i].get(), second_addresses}},
                        {}, inbox);
    TRIB_ASSIGN_OR_RETURN(
        auto unconnected,
        second.endpoints[i]->unconnected_link(
            1, r, second_addresses, error(StatusCode::kTimedOut, "the standby did not connect")));
    std::vector<std::unique_ptr<algorithms::PollableLink>> paths;
    TRIB_ASSIGN_OR_RETURN(auto a, transport::as_path(std::move(first.links[i])));
    TRIB_ASSIGN_OR_RETURN(auto b, transport::as_path(std::move(unconnected)));
    paths.push_back(std::move(a));
    paths.push_back(std::move(b));
    TRIB_ASSIGN_OR_RETURN(
        auto link, transport::make_failover_link(
                       reconnect_params(r, changes, *redialers[i], inbox, logs), std::move(paths)));
    // Once every pair's standby is connected at both ends, the preferred path of 0-1 goes.
    auto cut = [&](std::uint64_t) {
      if (r == 0 && !fired && redialers[0]->reconnects() == 2 &&
          redialers[1]->reconnects() == 2 && redialers[2]->reconnects() == 2) {
        fired = true;
        ::shutdown(cut_fd, SHUT_RDWR);
      }
    };
    auto moved_over = [&] { return changes.moved(0, 1, 0, 1) && changes.moved(1, 0, 0, 1); };
    TRIB_RETURN_IF_ERROR(
        reduce_rounds(*link, r, expected[i], &bad_rounds[i], cut, moved_over).status());
    changes.end();
    return drain_together(*link, drained, kRanks);
  });
  ASSERT_TRUE(fired.load()) << "the standby never connected at every end\n" << logs.dump();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << "rank " << r << ": " << statuses[static_cast<std::size_t>(r)].to_string() << "\n"
        << logs.dump();
    EXPECT_EQ(bad_rounds[static_cast<std::size_t>(r)], 0) << "rank " << r;
  }
  // Every rank's two standby connections; 0 and 1 may have re-dialled their cut preferred
  // connection too by the end.
  EXPECT_EQ(redialers[2]->reconnects(), 2u);
  for (int r : {0, 1}) {
    EXPECT_GE(redialers[static_cast<std::size_t>(r)]->reconnects(), 2u) << "rank " << r;
    EXPECT_LE(redialers[static_cast<std::size_t>(r)]->reconnects(), 3u) << "rank " << r;
  }
  EXPECT_TRUE(changes.moved(0, 1, 0, 1) && changes.moved(1, 0, 0, 1)) << logs.dump();
  EXPECT_TRUE(logs.contains("path tcp:second reconnected")) << logs.dump();
}

// Every path of one pair fails at once mid-collective (both of rank 0's connections to
// rank 1 shut down: an operator's ss -K, a middlebox that dropped its state): with a grace
// (FailoverParams::stranded_grace) the pair waits for a new connection instead of failing,
// the knock finds rank 1 alive, both paths are re-dialled, and the pair goes on where the
// first new connection is, then back up to the preferred path: every round's result right,
// no error anywhere (in the agent: no view change).
TEST(FailoverStranded, APairWhoseEveryPathFailsWaitsForANewConnectionAndGoesOn) {
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = (64 << 10) / sizeof(float) + 3;
  testing::LogCapture logs;
  const auto expected = plain_tcp_sums(kRanks, kCount, logs);
  TwoNetworks nets(kRanks, logs);
  for (const Status& st : nets.connect()) ASSERT_TRUE(st.is_ok()) << st.to_string();
  const int cut_fd = TwoNetworks::socket_to_rank1(nets.first);
  ASSERT_GE(cut_fd, 0);
  const int standby_fd = TwoNetworks::socket_to_rank1(nets.second);
  ASSERT_GE(standby_fd, 0);

  PathChanges changes;
  auto& redialers = nets.redialers;
  std::atomic<bool> fired{false};
  std::atomic<int> drained{0};
  std::vector<int> bad_rounds(kRanks, 0);
  const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
    const auto i = static_cast<std::size_t>(r);
    std::shared_ptr<transport::ReconnectInbox> inbox;
    testing::FaultPath* cut = nullptr;
    TRIB_ASSIGN_OR_RETURN(auto paths, nets.paths_of(r, &inbox, &cut));
    if (r == 0) {
      cut->fire_at(40, [&fired, cut_fd, standby_fd] {  // mid-collective, both at once
        fired = true;
        ::shutdown(cut_fd, SHUT_RDWR);
        ::shutdown(standby_fd, SHUT_RDWR);
      });
    }
    transport::FailoverParams params = reconnect_params(r, changes, *redialers[i], inbox, logs);
    params.probe_interval = std::chrono::milliseconds(20);
    params.stranded_grace = std::chrono::seconds(5);
    params.on_stranded = [&redialers, i](int peer) { redialers[i]->knock(1, peer); };
    // Re-dialled only once this end has seen both paths to the peer fail (as when what
    // reset them lets new connections through a moment later). Otherwise, on a loaded
    // machine, a new connection of the first path can be in before this end noticed the
    // second fail, and the pair moves there instead of waiting: right, but not this test.
    auto downs = std::make_shared<std::set<std::pair<int, int>>>();  // the link's thread only
    params.on_down = [&redialers, i, downs](int path, int peer) {
      downs->insert({path, peer});
      if (downs->count({0, peer}) > 0 && downs->count({1, peer}) > 0) {
        redialers[i]->want(1, 0, peer);
        redialers[i]->want(1, 1, peer);
      }
    };
    TRIB_ASSIGN_OR_RETURN(auto link, transport::make_failover_link(params, std::move(paths)));
    // Rank 0 says when to stop: once both ends are back on the preferred path after the cut.
    auto back_up = [&] {
      return fired && changes.last_to(0, 1) == 0 && changes.last_to(1, 0) == 0 &&
             changes.moves_of(0, 1) >= 1 && changes.moves_of(1, 0) >= 1;
    };
    TRIB_RETURN_IF_ERROR(reduce_rounds(
                             *link, r, expected[i], &bad_rounds[i], [](std::uint64_t) {}, back_up)
                             .status());
    changes.end();
    return drain_together(*link, drained, kRanks);
  });
  ASSERT_TRUE(fired.load()) << "the cut never happened";
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].is_ok())
        << "rank " << r << ": " << statuses[static_cast<std::size_t>(r)].to_string() << "\n"
        << logs.dump();
    EXPECT_EQ(bad_rounds[static_cast<std::size_t>(r)], 0) << "rank " << r;
  }
  EXPECT_TRUE(logs.contains("every path failed")) << logs.dump();
  EXPECT_TRUE(logs.contains("the pair goes on there")) << logs.dump();
  // Reported to whoever counts the moves (the agent: tributary_link_fallbacks_total with
  // cause "waiting", then a recovery). One end waiting is enough here.
  EXPECT_TRUE(changes.stranded(0, 1) || changes.stranded(1, 0)) << logs.dump();
  EXPECT_FALSE(logs.contains("is gone")) << logs.dump();
  EXPECT_EQ(changes.last_to(0, 1), 0) << logs.dump();
  EXPECT_EQ(changes.last_to(1, 0), 0) << logs.dump();
  // The other pairs never moved.
  EXPECT_EQ(changes.moves_of(0, 2) + changes.moves_of(2, 0) + changes.moves_of(1, 2) +
                changes.moves_of(2, 1),
            0);
}

// The same pair's peer is gone (its process ended: its listeners closed, then its
// connections): the knock finds every address refusing, and the pair fails at once with
// kPeerLost, long before its grace, as a member failure; nothing waits it out.
TEST(FailoverStranded, APairWhosePeerIsGoneFailsAtOnceNotAfterItsGrace) {
  constexpr int kRanks = 2;
  constexpr std::size_t kCount = 4096;
  testing::LogCapture logs;
  TwoNetworks nets(kRanks, logs);
  for (const Status& st : nets.connect()) ASSERT_TRUE(st.is_ok()) << st.to_string();
  PathChanges changes;
  auto& redialers = nets.redialers;
  constexpr auto kGrace = std::chrono::seconds(20);
  std::atomic<bool> first_round_done{false};
  double failed_after_s = -1;
  const auto statuses = testing::run_ranks(kRanks, [&](int r) -> Status {
    const auto i = static_cast<std::size_t>(r);
    std::shared_ptr<transport::ReconnectInbox> inbox;
    testing::FaultPath* unused = nullptr;
    TRIB_ASSIGN_OR_RETURN(auto paths, nets.paths_of(r, &inbox, &unused));
    transport::FailoverParams params = reconnect_params(r, changes, *redialers[i], inbox, logs);
    params.stranded_grace = kGrace;
    params.on_stranded = [&redialers, i](int peer) { redialers[i]->knock(1, peer); };
    TRIB_ASSIGN_OR_RETURN(auto link, transport::make_failover_link(params, std::move(paths)));
    const auto in = random_floats(r, kCount);
    std::vector<float> out(kCount);
    TRIB_RETURN_IF_ERROR(all_reduce(*link, in.data(), out.data(), kCount, DType::kFloat32,
                                    ReduceOp::kSum, options_for(AllReduceAlgorithm::kRing, 1)));
    if (r == 1) {
      // The process ends: nothing listens any more, then its connections close.
      redialers[i]->stop();
      nets.first.endpoints[i].reset();
      nets.second.endpoints[i].reset();
      link.reset();
      first_round_done = true;
      return Status();
    }
    while (!first_round_done.load()) std::this_thread::yield();
    const auto t0 = std::chrono::steady_clock::now();
    algorithms::CollectiveOptions o = options_for(AllReduceAlgorithm::kRing, 2);
    o.deadline = Deadline::after(std::chrono::seconds(60));
    const Status st =
        all_reduce(*link, in.data(), out.data(), kCount, DType::kFloat32, ReduceOp::kSum, o);
    failed_after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    redialers[i]->stop();
    return st;
  });
  EXPECT_TRUE(statuses[1].is_ok()) << statuses[1].to_string();
  EXPECT_EQ(statuses[0].code(), StatusCode::kPeerLost) << statuses[0].to_string() << "\n"
                                                       << logs.dump();
  EXPECT_LT(failed_after_s, 5.0) << "waited out the grace for a peer that is gone\n" << logs.dump();
  EXPECT_TRUE(logs.contains("is gone")) << logs.dump();
}

INSTANTIATE_TEST_SUITE_P(Paths, FailoverReconnect, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "StandbyFirst" : "Preferred";
                         });

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// --transport is parsed once, into the data plane's config: a value that names no
// transport is refused there, naming the flag and the choices, before anything listens.
TEST(DataPlaneConfig, TheTransportChoiceIsParsedOnceAndABadOneNamesTheFlag) {
  for (const char* name : {"auto", "tcp", "shm", "rdma"}) {
    auto choice = agent::parse_transport_choice(name);
    ASSERT_TRUE(choice.is_ok()) << name;
    EXPECT_EQ(agent::to_string(*choice), name);
  }
  agent::WorkerConfig config;
  config.secret = "transport-choice-test";
  config.transport = "udp";
  auto refused = agent::DataPlaneConfig::of(config);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--transport 'udp'"), std::string::npos);
  EXPECT_NE(refused.status().message().find("auto, shm, rdma or tcp"), std::string::npos);
  config.transport = "shm";
  auto shm = agent::DataPlaneConfig::of(config);
  ASSERT_TRUE(shm.is_ok());
  EXPECT_EQ(shm->transport, agent::TransportChoice::kShm);
}

}  // namespace
}  // namespace tributary
