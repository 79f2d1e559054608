// The shared-memory link (transport/shm_link.h): every all-reduce algorithm x dtype over
// rings far smaller than the messages, bit for bit against the in-memory fabric; message
// matching across the ring's stream; and what it guarantees when a peer goes away, goes
// silent, aborts, or its segment is corrupted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "algorithms/pollable_link.h"
#include "transport/shm_link_impl.h"
#include "core/reduce.h"
#include "tests/algorithms/test_values.h"
#include "tests/support/combining_receives.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"
#include "tests/transport/shm_test_util.h"

namespace tributary::testing {
namespace {

using namespace std::chrono_literals;
using algorithms::AllReduceAlgorithm;
using algorithms::Tag;

Deadline soon() { return Deadline::after(10s); }

// The all-reduce of every rank over `link_of`, inputs from make_input.
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

// World size, and whether messages of 1 KiB and more go single-copy (read from the
// sender's memory) instead of through the rings.
class ShmAllReduce : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ShmAllReduce, EveryAlgorithmAndDtypeMatchesTheMemoryFabricBitForBit) {
  const auto [n, single_copy] = GetParam();
  // 4 KiB rings: a 70001-element float64 message streams through one ~140 times.
  ShmGroup shm = make_shm_group(n, 4096, 1, Logger("link"), single_copy ? 1024 : 0);
  ASSERT_EQ(shm.links.size(), static_cast<std::size_t>(n));
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
              n, [&](int r) -> algorithms::Link& { return *shm.links[r]; }, algorithm, dtype, op,
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
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmAllReduce,
                         ::testing::Combine(::testing::Values(2, 3, 5), ::testing::Bool()),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_single_copy" : "");
                         });

TEST(ShmLink, MessagesLargerThanTheRingMatchByTagInAnyOrder) {
  ShmGroup g = make_shm_group(2, 4096);
  ASSERT_EQ(g.links.size(), 2u);
  const Bytes big = pattern(1, 1 << 20), small = pattern(2, 100);
  const auto results = run_ranks(2, [&](int r) -> Status {
    auto& link = *g.links[r];
    if (r == 0) {
      // The big one first: it cannot fit, and the receiver asks for the small one first.
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
}

// A single-copy send is complete only once its receiver has read it. Both ranks here wait
// for all their sends before they post a receive (what halving-doubling's doubling steps
// do once a send window fills, found at 8 ranks and 16 MiB): each reads the other's early
// messages before it sleeps, so neither runs into its deadline.
TEST(ShmLink, SingleCopySendsBothWaysCompleteBeforeEitherReceiveIsPosted) {
  ShmGroup g = make_shm_group(2, 4096, 1, Logger("link"), 1024);
  ASSERT_EQ(g.links.size(), 2u);
  constexpr int kMessages = 24;
  const auto started = std::chrono::steady_clock::now();
  const auto results = run_ranks(2, [&](int r) -> Status {
    auto& link = *g.links[r];
    const int peer = 1 - r;
    std::vector<Bytes> out;
    for (int i = 0; i < kMessages; ++i) out.push_back(pattern(r * 100 + i, 8192));
    std::vector<algorithms::Link::Handle> sends;
    for (int i = 0; i < kMessages; ++i) {
      sends.push_back(link.send(peer, Tag{1, static_cast<std::uint32_t>(i), 0}, out[i]));
    }
    const Deadline deadline = Deadline::after(5s);
    for (const auto h : sends) TRIB_RETURN_IF_ERROR(link.wait(h, deadline));
    for (int i = 0; i < kMessages; ++i) {
      Bytes got(8192);
      TRIB_RETURN_IF_ERROR(
          link.wait(link.recv(peer, Tag{1, static_cast<std::uint32_t>(i), 0}, got), deadline));
      if (got != pattern(peer * 100 + i, 8192)) {
        return error(StatusCode::kInternal, "wrong bytes in message " + std::to_string(i));
      }
    }
    return Status();
  });
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

// A stamp rides in the ring header to the receive that takes the message: through the
// ring or by single copy, posted before the message or after it arrived.
TEST(ShmLink, StampsReachTheReceiveThatTakesTheMessage) {
  ShmGroup g = make_shm_group(2, 4096, 1, Logger("link"), 1024);  // single copy from 1 KiB
  const auto results = run_ranks(2, [&](int r) -> Status {
    auto* link = dynamic_cast<algorithms::PollableLink*>(g.links[r].get());
    if (link == nullptr || !link->carries_stamps()) {
      return error(StatusCode::kInternal, "the shared-memory link carries no stamps");
    }
    const Deadline deadline = Deadline::after(5s);
    // Ring, single copy, plain send; with their stamps.
    const std::size_t sizes[] = {100, 8192, 100};
    const std::uint64_t stamps[] = {11, std::uint64_t{0xabc} << 40, 0};
    if (r == 0) {
      std::vector<Bytes> out;
      std::vector<algorithms::Link::Handle> hs;
      for (std::uint32_t i = 0; i < 3; ++i) out.push_back(pattern(static_cast<int>(i), sizes[i]));
      for (std::uint32_t i = 0; i < 2; ++i) hs.push_back(link->send_stamped(1, Tag{1, i, 0}, out[i], stamps[i]));
      hs.push_back(link->send(1, Tag{1, 2, 0}, out[2]));
      for (const auto h : hs) TRIB_RETURN_IF_ERROR(link->wait(h, deadline));
      return Status();
    }
    std::vector<Bytes> in;
    for (std::size_t size : sizes) in.emplace_back(size);
    // The single-copy one is taken first, so the ring's one before it arrives early.
    for (std::uint32_t i : {1u, 0u, 2u}) {
      const auto h = link->recv(0, Tag{1, i, 0}, in[i]);
      while (!link->test(h)) {
        if (deadline.passed()) return error(StatusCode::kTimedOut, "message " + std::to_string(i));
        link->drive(Deadline::after(1ms));
      }
      if (link->stamp(h) != stamps[i]) {
        return error(StatusCode::kInternal, "message " + std::to_string(i) + " has stamp " +
                                                std::to_string(link->stamp(h)));
      }
      TRIB_RETURN_IF_ERROR(link->wait(h, deadline));
      if (in[i] != pattern(static_cast<int>(i), sizes[i])) {
        return error(StatusCode::kInternal, "wrong bytes in message " + std::to_string(i));
      }
    }
    return Status();
  });
  for (const Status& st : results) EXPECT_TRUE(st.is_ok()) << st.to_string();
}

// recv_combine reduces out of the ring as the bytes stream through it: a float64 payload
// much larger than the 4 KiB ring (elements split by the ring's end), in place and not,
// posted before the message, after it arrived whole, and while another peer's message is
// in progress; the bits of receiving and then reducing.
TEST(ShmLink, ACombiningReceiveGivesTheBitsOfReceiveThenReduce) {
  ShmGroup g = make_shm_group(3, 4096);
  ASSERT_EQ(g.links.size(), 3u);
  expect_combining_receives_match_receive_then_reduce(
      {g.links[0].get(), g.links[1].get(), g.links[2].get()}, 20011, 10s);
}

TEST(ShmLink, ACombiningReceiveOfAnotherLengthFailsWithMismatch) {
  ShmGroup g = make_shm_group(2, 1 << 16);
  const Bytes data = pattern(3, 64);
  auto s = g.links[0]->send(1, Tag{1, 0, 0}, data);
  Bytes out(32), operand(32);
  auto r = g.links[1]->recv_combine(
      0, Tag{1, 0, 0}, out, algorithms::Combine{operand.data(), DType::kInt32, ReduceOp::kSum, true});
  EXPECT_TRUE(g.links[0]->wait(s, soon()).is_ok());
  const Status st = g.links[1]->wait(r, soon());
  EXPECT_EQ(st.code(), StatusCode::kMismatch) << st.to_string();
}

TEST(ShmLink, ALengthMismatchFailsTheReceive) {
  ShmGroup g = make_shm_group(2, 1 << 16);
  const Bytes data = pattern(3, 64);
  auto s = g.links[0]->send(1, Tag{1, 0, 0}, data);
  Bytes wrong(32);
  auto r = g.links[1]->recv(0, Tag{1, 0, 0}, wrong);
  EXPECT_TRUE(g.links[0]->wait(s, soon()).is_ok());
  const Status st = g.links[1]->wait(r, soon());
  EXPECT_EQ(st.code(), StatusCode::kMismatch) << st.to_string();
}

TEST(ShmLink, ADeadPeerFailsTheWaiterAtOnceNotAtItsDeadline) {
  ShmGroup g = make_shm_group(3, 1 << 16);
  Bytes buf(1 << 20);
  auto r = g.links[0]->recv(2, Tag{1, 0, 0}, buf);
  const auto t0 = std::chrono::steady_clock::now();
  std::thread killer([&] {
    EXPECT_TRUE(wait_until_asleep(g, 0, 2)) << "the waiter never fell asleep";
    g.links[2].reset();  // what the kernel does to a killed process's sockets and mapping
  });
  const Status st = g.links[0]->wait(r, Deadline::after(20s));
  killer.join();
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
  EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(ShmLink, WhatArrivedBeforeThePeerDiedIsStillDelivered) {
  ShmGroup g = make_shm_group(2, 1 << 16);
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

// A message that arrived whole before this side aborted its link is still delivered to a
// receive posted after (the failover link may have counted it as received and must read it
// back from the path it leaves); anything else fails with the abort.
TEST(ShmLink, AMessageThatArrivedWholeBeforeALocalAbortIsStillDelivered) {
  ShmGroup g = make_shm_group(2, 1 << 16);
  auto* a = dynamic_cast<algorithms::PollableLink*>(g.links[1].get());
  auto* b = dynamic_cast<algorithms::PollableLink*>(g.links[0].get());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const Bytes data = pattern(4, 1000);
  ASSERT_TRUE(a->wait(a->send_stamped(0, Tag{1, 0, 0}, data, 5), soon()).is_ok());
  std::vector<algorithms::EarlyArrival> early;
  const Deadline until = soon();
  while (early.empty() && !until.passed()) {
    b->look();
    b->report_early(1, early);
  }
  ASSERT_EQ(early.size(), 1u);
  b->abort(error(StatusCode::kPeerLost, "test: this side gave the path up"));
  Bytes got(data.size());
  ASSERT_TRUE(b->wait(b->recv(1, Tag{1, 0, 0}, got), soon()).is_ok());
  EXPECT_EQ(got, data);
  Bytes more(8);
  EXPECT_EQ(b->wait(b->recv(1, Tag{2, 0, 0}, more), soon()).code(), StatusCode::kPeerLost);
}

TEST(ShmLink, ASilentPeerRunsIntoTheDeadline) {
  ShmGroup g = make_shm_group(2, 1 << 16);
  Bytes buf(8);
  auto r = g.links[0]->recv(1, Tag{1, 0, 0}, buf);
  const Status st = g.links[0]->wait(r, Deadline::after(200ms));
  EXPECT_EQ(st.code(), StatusCode::kTimedOut) << st.to_string();
}

TEST(ShmLink, AnAbortWithAnErrorReachesThePeerWithItsReason) {
  ShmGroup g = make_shm_group(3, 1 << 16);
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

TEST(ShmLink, ALocalAbortWakesTheWaiter) {
  ShmGroup g = make_shm_group(2, 1 << 16);
  Bytes buf(8);
  auto r = g.links[0]->recv(1, Tag{1, 0, 0}, buf);
  std::thread aborter([&] {
    EXPECT_TRUE(wait_until_asleep(g, 0, 1)) << "the waiter never fell asleep";
    g.links[0]->abort(Status());
  });
  const Status st = g.links[0]->wait(r, Deadline::after(20s));
  aborter.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.to_string();
}

TEST(ShmLink, APoisonedSegmentFailsThatPeerWithBadFrame) {
  ShmGroup g = make_shm_group(2, 1 << 16);
  transport::ShmSegment& seg = g.spare[0][1];
  // Garbage where rank 1 reads rank 0's next header, published as if rank 0 wrote it.
  std::memset(seg.base() + 4096, 0xab, 64);
  auto* control = reinterpret_cast<transport::RingControl*>(seg.base() + 128);
  control->head.store(sizeof(transport::RingHeader));
  Bytes buf(8);
  auto r = g.links[1]->recv(0, Tag{1, 0, 0}, buf);
  const Status st = g.links[1]->wait(r, soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
}

TEST(ShmSegment, OnlyThePairAndEpochItWasMadeForMayOpenIt) {
  const std::string name = *transport::ShmSegment::random_name();
  auto created = transport::ShmSegment::create(name, 7, 0, 1, 4096);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  EXPECT_EQ(transport::ShmSegment::open(name, 8, 0, 1).status().code(), StatusCode::kMismatch);
  EXPECT_EQ(transport::ShmSegment::open(name, 7, 0, 2).status().code(), StatusCode::kMismatch);
  EXPECT_TRUE(transport::ShmSegment::open(name, 7, 0, 1).is_ok());
  EXPECT_EQ(transport::ShmSegment::create(name, 7, 0, 1, 4096).status().code(),
            StatusCode::kUnavailable);  // O_EXCL: a name is never reused
  transport::ShmSegment::unlink(name);
  EXPECT_EQ(transport::ShmSegment::open(name, 7, 0, 1).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(transport::ShmSegment::create(name, 7, 0, 1, 5000).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::testing
