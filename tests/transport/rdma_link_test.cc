// The RDMA link's protocol (transport/rdma_link.h) over fake verbs (fake_verbs.h), ranks
// as threads: every all-reduce algorithm x dtype through 256-byte slots and four credits,
// bit for bit against the in-memory fabric, with no send ever finding no receive posted;
// matching across the chunk stream; credits when both sides flood each other; and what it
// guarantees when a peer dies, its queue pair fails, it goes silent, aborts, or sends
// garbage. The verbs calls are fakes: this is the protocol, not the hardware.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "tests/algorithms/test_values.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"
#include "tests/transport/rdma_test_util.h"

namespace tributary::testing {
namespace {

using namespace std::chrono_literals;
using algorithms::AllReduceAlgorithm;
using algorithms::Tag;

Deadline soon() { return Deadline::after(10s); }
Deadline shortly() { return Deadline::after(2s); }

std::vector<Bytes> all_reduce_on(int n, const std::function<algorithms::Link&(int)>& link_of,
                                 AllReduceAlgorithm algorithm, DType dtype, ReduceOp op,
                                 std::size_t count, std::uint64_t seq) {
  std::vector<Bytes> out(static_cast<std::size_t>(n));
  const auto results = run_ranks(n, [&](int r) {
    const Bytes in = make_input(dtype, op, r, count);
    out[r].resize(in.size());
    algorithms::CollectiveOptions o;
    o.seq = seq;
    o.algorithm = algorithm;
    o.deadline = soon();
    return algorithms::all_reduce(link_of(r), in.data(), out[r].data(), count, dtype, op, o);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(results[r].is_ok()) << "rank " << r << ": " << results[r].to_string();
  }
  return out;
}

class RdmaAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(RdmaAllReduce, EveryAlgorithmAndDtypeMatchesTheMemoryFabricBitForBit) {
  const int n = GetParam();
  // 256-byte slots, 4 credits: a 70001-element float64 message is ~2300 chunks.
  RdmaGroup rdma = make_rdma_group(n);
  ASSERT_EQ(rdma.links.size(), static_cast<std::size_t>(n));
  algorithms::MemoryFabric fabric(n);
  std::uint64_t seq = 1;
  for (int a = 1; a < algorithms::kNumAllReduceAlgorithms; ++a) {
    const auto algorithm = static_cast<AllReduceAlgorithm>(a);
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                        DType::kInt32, DType::kInt64, DType::kUInt8, DType::kInt8}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (std::size_t count : {0, 1, 7, 1000, 70001}) {
          SCOPED_TRACE(std::string(to_string(algorithm)) + " " + std::string(to_string(dtype)) +
                       " count " + std::to_string(count));
          const auto got = all_reduce_on(
              n, [&](int r) -> algorithms::Link& { return *rdma.links[r]; }, algorithm, dtype, op,
              count, seq);
          const auto want = all_reduce_on(
              n, [&](int r) -> algorithms::Link& { return fabric.link(r); }, algorithm, dtype, op,
              count, seq);
          ++seq;
          for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << "rank " << r;
        }
      }
    }
  }
  EXPECT_EQ(rdma.fabric->rnr_errors(), 0u) << "a send found no receive posted: credits are wrong";
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RdmaAllReduce, ::testing::Values(2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

TEST(RdmaLink, MessagesLargerThanTheSlotsMatchByTagInAnyOrder) {
  RdmaGroup g = make_rdma_group(2);
  ASSERT_EQ(g.links.size(), 2u);
  const Bytes big = pattern(1, 1 << 20), small = pattern(2, 100);
  const auto results = run_ranks(2, [&](int r) -> Status {
    auto& link = *g.links[r];
    if (r == 0) {
      // The big one first: it is ~4000 chunks, and the receiver asks for the small one first.
      auto a = link.send(1, Tag{1, 0, 0}, big);
      auto b = link.send(1, Tag{1, 1, 0}, small);
      TRIB_RETURN_IF_ERROR(link.wait(a, soon()));
      return link.wait(b, soon());
    }
    Bytes got_small(small.size()), got_big(big.size());
    auto b = link.recv(0, Tag{1, 1, 0}, got_small);
    TRIB_RETURN_IF_ERROR(link.wait(b, soon()));
    auto a = link.recv(0, Tag{1, 0, 0}, got_big);
    TRIB_RETURN_IF_ERROR(link.wait(a, soon()));
    if (got_small != small || got_big != big) return error(StatusCode::kInternal, "wrong bytes");
    return Status();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(g.fabric->rnr_errors(), 0u);
}

TEST(RdmaLink, TwoPeersFloodingEachOtherNeverRunOutOfCredits) {
  // Both post 500 sends before either looks at what arrived, so each spends its credits
  // without returning any; then both wait. Had data spent the last credit, both would sit
  // at zero credits owing the other everything (a deadlock, seen here as kTimedOut). As
  // many send slots as credits, so that the credits are what runs out.
  RdmaGroup g = make_rdma_group(2, {4, 4, 256});
  ASSERT_EQ(g.links.size(), 2u);
  constexpr int kMessages = 500;
  std::vector<std::vector<Bytes>> out(2);
  std::vector<std::vector<algorithms::Link::Handle>> sends(2);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < kMessages; ++i)
      out[r].push_back(pattern(static_cast<std::uint32_t>(r * kMessages + i), 100 + r));
  }
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < kMessages; ++i) {
      sends[r].push_back(
          g.links[r]->send(1 - r, Tag{1, static_cast<std::uint32_t>(i), 0}, out[r][i]));
    }
  }
  const auto results = run_ranks(2, [&](int r) -> Status {
    auto& link = *g.links[r];
    const int peer = 1 - r;
    for (auto h : sends[r]) TRIB_RETURN_IF_ERROR(link.wait(h, shortly()));
    Bytes in(100 + peer);
    for (int i = 0; i < kMessages; ++i) {
      auto h = link.recv(peer, Tag{1, static_cast<std::uint32_t>(i), 0}, in);
      TRIB_RETURN_IF_ERROR(link.wait(h, soon()));
      if (in != out[peer][i]) {
        return error(StatusCode::kInternal, "wrong bytes in message " + std::to_string(i));
      }
    }
    return Status();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(g.fabric->rnr_errors(), 0u);
}

TEST(RdmaLink, ALengthMismatchFailsTheReceive) {
  RdmaGroup g = make_rdma_group(2);
  const Bytes data = pattern(3, 640);
  Bytes wrong(320);
  auto r = g.links[1]->recv(0, Tag{1, 0, 0}, wrong);
  const auto results = run_ranks(2, [&](int rank) -> Status {
    if (rank == 0) {
      auto s = g.links[0]->send(1, Tag{1, 0, 0}, data);
      return g.links[0]->wait(s, soon());
    }
    return g.links[1]->wait(r, soon());
  });
  EXPECT_TRUE(results[0].is_ok()) << results[0].to_string();
  EXPECT_EQ(results[1].code(), StatusCode::kMismatch) << results[1].to_string();
}

TEST(RdmaLink, ADeadPeerFailsTheWaiterAtOnceNotAtItsDeadline) {
  RdmaGroup g = make_rdma_group(3);
  Bytes buf(1 << 20);
  auto r = g.links[0]->recv(2, Tag{1, 0, 0}, buf);
  const auto t0 = std::chrono::steady_clock::now();
  std::thread killer([&] {
    EXPECT_TRUE(wait_until_armed(*g.fabric, 0)) << "the waiter never went to sleep";
    g.links[2].reset();  // what the kernel does to a killed process's sockets and queue pairs
  });
  const Status st = g.links[0]->wait(r, Deadline::after(20s));
  killer.join();
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
  EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(RdmaLink, WhatArrivedBeforeThePeerDiedIsStillDelivered) {
  RdmaGroup g = make_rdma_group(2, {2, 8, 4096});
  const Bytes data = pattern(4, 1000);
  auto s = g.links[1]->send(0, Tag{1, 0, 0}, data);
  ASSERT_TRUE(g.links[1]->wait(s, soon()).is_ok());
  g.links[1].reset();
  Bytes got(data.size());
  auto r = g.links[0]->recv(1, Tag{1, 0, 0}, got);
  ASSERT_TRUE(g.links[0]->wait(r, soon()).is_ok());
  EXPECT_EQ(got, data);
  Bytes more(8);
  auto r2 = g.links[0]->recv(1, Tag{2, 0, 0}, more);
  EXPECT_EQ(g.links[0]->wait(r2, soon()).code(), StatusCode::kPeerLost);
}

TEST(RdmaLink, AFailedCompletionFailsThatPeerWithPeerLost) {
  // The peer's adapter is gone but its process (and the TCP connection) lives: the send's
  // completion reports the retries exhausted.
  RdmaGroup g = make_rdma_group(3);
  g.fabric->cut(1);
  const Bytes data = pattern(5, 64);
  auto s = g.links[0]->send(1, Tag{1, 0, 0}, data);
  Bytes buf(8);
  auto r = g.links[0]->recv(1, Tag{1, 1, 0}, buf);
  const Status sent = g.links[0]->wait(s, soon());  // packed before the completion came back
  const Status st = g.links[0]->wait(r, soon());
  EXPECT_TRUE(sent.is_ok()) << sent.to_string();
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("retry counter exceeded"), std::string::npos) << st.to_string();
  // The other peer is unaffected.
  auto s2 = g.links[0]->send(2, Tag{1, 0, 0}, data);
  Bytes got(data.size());
  auto r2 = g.links[2]->recv(0, Tag{1, 0, 0}, got);
  EXPECT_TRUE(g.links[0]->wait(s2, soon()).is_ok());
  EXPECT_TRUE(g.links[2]->wait(r2, soon()).is_ok());
  EXPECT_EQ(got, data);
}

TEST(RdmaLink, ASilentPeerRunsIntoTheDeadline) {
  RdmaGroup g = make_rdma_group(2);
  Bytes buf(8);
  auto r = g.links[0]->recv(1, Tag{1, 0, 0}, buf);
  const Status st = g.links[0]->wait(r, Deadline::after(200ms));
  EXPECT_EQ(st.code(), StatusCode::kTimedOut) << st.to_string();
}

TEST(RdmaLink, ASendToAPeerThatReturnsNoCreditsRunsIntoTheDeadline) {
  // Four credits of 256 bytes: 64 KiB cannot leave while the peer does not drive its link.
  RdmaGroup g = make_rdma_group(2);
  const Bytes data = pattern(6, 64 << 10);
  auto s = g.links[0]->send(1, Tag{1, 0, 0}, data);
  const Status st = g.links[0]->wait(s, Deadline::after(200ms));
  EXPECT_EQ(st.code(), StatusCode::kTimedOut) << st.to_string();
  EXPECT_EQ(g.fabric->rnr_errors(), 0u);
}

TEST(RdmaLink, AnAbortWithAnErrorReachesThePeerWithItsReason) {
  RdmaGroup g = make_rdma_group(3);
  Bytes buf(8);
  auto r = g.links[1]->recv(0, Tag{1, 0, 0}, buf);
  g.links[0]->abort(error(StatusCode::kMismatch, "count differs"));
  const Status st = g.links[1]->wait(r, soon());
  EXPECT_EQ(st.code(), StatusCode::kMismatch) << st.to_string();
  EXPECT_NE(st.message().find("rank 0 aborted: count differs"), std::string::npos)
      << st.to_string();
  // Relayed onwards, it keeps the origin's words.
  g.links[1]->abort(st);
  auto r2 = g.links[2]->recv(1, Tag{1, 0, 0}, buf);
  const Status relayed = g.links[2]->wait(r2, soon());
  EXPECT_EQ(relayed.message(), "rank 0 aborted: count differs") << relayed.to_string();
}

TEST(RdmaLink, ALocalAbortWakesTheWaiter) {
  RdmaGroup g = make_rdma_group(2);
  Bytes buf(8);
  auto r = g.links[0]->recv(1, Tag{1, 0, 0}, buf);
  std::thread aborter([&] {
    EXPECT_TRUE(wait_until_armed(*g.fabric, 0)) << "the waiter never went to sleep";
    g.links[0]->abort(Status());
  });
  const Status st = g.links[0]->wait(r, Deadline::after(20s));
  aborter.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.to_string();
}

TEST(RdmaLink, AGarbageChunkFailsThatPeerWithBadFrame) {
  RdmaGroup g = make_rdma_group(2);
  g.fabric->corrupt_next_from(0);
  const Bytes data = pattern(7, 64);
  auto s = g.links[0]->send(1, Tag{1, 0, 0}, data);
  Bytes buf(data.size());
  auto r = g.links[1]->recv(0, Tag{1, 0, 0}, buf);
  EXPECT_TRUE(g.links[0]->wait(s, soon()).is_ok());
  const Status st = g.links[1]->wait(r, soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
}

TEST(RdmaLink, AReceiveThatTimedOutTakesNothingThatArrivesLater) {
  // The receiver gives up on a message before it comes; when it comes it is buffered as
  // unexpected, and the next message is matched as usual.
  RdmaGroup g = make_rdma_group(2);
  const Bytes first = pattern(8, 4096), second = pattern(9, 300);
  Bytes a(first.size()), b(second.size());
  auto ra = g.links[1]->recv(0, Tag{1, 0, 0}, a);
  EXPECT_EQ(g.links[1]->wait(ra, Deadline::after(50ms)).code(), StatusCode::kTimedOut);
  const auto results = run_ranks(2, [&](int r) -> Status {
    if (r == 0) {
      auto s1 = g.links[0]->send(1, Tag{1, 0, 0}, first);
      auto s2 = g.links[0]->send(1, Tag{1, 1, 0}, second);
      TRIB_RETURN_IF_ERROR(g.links[0]->wait(s1, soon()));
      return g.links[0]->wait(s2, soon());
    }
    auto rb = g.links[1]->recv(0, Tag{1, 1, 0}, b);
    return g.links[1]->wait(rb, soon());
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(b, second);
}

}  // namespace
}  // namespace tributary::testing
