#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <numeric>
#include <thread>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "algorithms/pollable_link.h"
#include "core/check.h"
#include "core/reduce.h"
#include "tests/agent/tcp_test_util.h"
#include "tests/algorithms/test_values.h"
#include "tests/support/combining_receives.h"

namespace tributary::testing {
namespace {

using namespace std::chrono_literals;
using transport::FrameHeader;
using transport::HandshakeType;
using transport::RejectReason;
using algorithms::Tag;

std::vector<std::byte> pattern(std::size_t n, int from, int to) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 31 + from * 7 + to * 13);
  return v;
}

// Everyone sends a distinct block to everyone; odd ranks post receives after their sends
// so both the direct and the unexpected-message paths run.
Status exchange(algorithms::Link& link, std::size_t bytes, std::uint64_t seq) {
  const int n = link.size(), me = link.rank();
  std::vector<std::vector<std::byte>> out(n), in(n);
  std::vector<algorithms::Link::Handle> handles;
  auto post_recvs = [&] {
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      in[p].assign(bytes, std::byte{0});
      handles.push_back(
          link.recv(p, algorithms::Tag{seq, 0, static_cast<std::uint32_t>(bytes)}, in[p]));
    }
  };
  if (me % 2 == 0) post_recvs();
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    out[p] = pattern(bytes, me, p);
    handles.push_back(
        link.send(p, algorithms::Tag{seq, 0, static_cast<std::uint32_t>(bytes)}, out[p]));
  }
  if (me % 2 == 1) post_recvs();
  for (auto h : handles) TRIB_RETURN_IF_ERROR(link.wait(h, soon()));
  for (int p = 0; p < n; ++p) {
    if (p != me && in[p] != pattern(bytes, p, me)) {
      return error(StatusCode::kInternal, "wrong bytes from rank " + std::to_string(p));
    }
  }
  return Status();
}

TEST(TcpLinkTest, ExchangesAcrossGroupSizesAndMessageSizes) {
  for (int n : {1, 2, 3, 5}) {
    LogCapture logs;
    Cluster c = make_cluster(n, logs);
    expect_all_ok(connect_all(c, 1));
    std::uint64_t seq = 1;
    for (std::size_t bytes :
         {std::size_t{0}, std::size_t{1}, std::size_t{4093}, std::size_t{(3 << 20) + 5}}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " bytes=" + std::to_string(bytes));
      expect_all_ok(run_ranks(n, [&](int r) { return exchange(*c.links[r], bytes, seq); }));
      ++seq;
    }
    for (int r = 1; r < n; ++r) {
      const transport::TcpEndpointStats s = c.endpoints[r]->stats();
      EXPECT_EQ(s.epoch, 1u);
      ASSERT_EQ(s.peers.size(), static_cast<std::size_t>(n - 1));
      EXPECT_GT(s.peers[0].bytes_received, (3u << 20));
    }
  }
}

TEST(TcpLinkTest, SameTagMessagesMatchInOrderAndTagsOutOfOrder) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  algorithms::Link& a = *c.links[0];
  algorithms::Link& b = *c.links[1];
  const std::string m1 = "first", m2 = "second", m3 = "other-tag";
  auto s1 = a.send(1, algorithms::Tag{1, 0, 0}, bytes_of(m1));
  auto s2 = a.send(1, algorithms::Tag{1, 0, 0}, bytes_of(m2));
  auto s3 = a.send(1, algorithms::Tag{2, 5, 0}, bytes_of(m3));
  std::string r3(m3.size(), '\0'), r1(m1.size(), '\0'), r2(m2.size(), '\0');
  // Receive the later tag first: the earlier frames sit as unexpected messages meanwhile.
  auto h3 = b.recv(0, algorithms::Tag{2, 5, 0}, bytes_of(r3));
  ASSERT_TRUE(b.wait(h3, soon()).is_ok());
  auto h1 = b.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(r1));
  auto h2 = b.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(r2));
  EXPECT_TRUE(b.wait(h2, soon()).is_ok());
  EXPECT_TRUE(b.wait(h1, soon()).is_ok());
  for (auto h : {s1, s2, s3}) EXPECT_TRUE(a.wait(h, soon()).is_ok());
  EXPECT_EQ(r1, m1);
  EXPECT_EQ(r2, m2);
  EXPECT_EQ(r3, m3);
}

// Rank r's link as the PollableLink a TCP link is (the failover link drives it so).
algorithms::PollableLink* pollable(Cluster& c, int r) {
  auto* link = dynamic_cast<algorithms::PollableLink*>(c.links[static_cast<std::size_t>(r)].get());
  TRIB_CHECK(link != nullptr) << "a TCP link that is not pollable";
  return link;
}

// A stamp rides in the frame header to the receive that takes the message, whether the
// receive was waiting (direct) or posted after the message arrived (unexpected).
TEST(TcpLinkTest, StampsReachTheReceiveThatTakesTheMessage) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  algorithms::PollableLink* a = pollable(c, 0);
  algorithms::PollableLink* b = pollable(c, 1);
  ASSERT_TRUE(a->carries_stamps());
  const std::string m1 = "early", m2 = "direct", m3 = "plain";
  std::string early(5, '\0'), direct(6, '\0'), plain(5, '\0');
  auto hd = b->recv(0, Tag{2, 0, 0}, bytes_of(direct));  // posted before it is sent
  auto s1 = a->send_stamped(1, Tag{1, 0, 0}, bytes_of(m1), 0xfeedull << 40);
  auto s2 = a->send_stamped(1, Tag{2, 0, 0}, bytes_of(m2), 7);
  auto s3 = a->send(1, Tag{3, 0, 0}, bytes_of(m3));
  for (auto h : {s1, s2, s3}) ASSERT_TRUE(a->wait(h, soon()).is_ok());
  const Deadline until = soon();
  while (!b->test(hd) && !until.passed()) b->drive(soon());
  ASSERT_TRUE(b->test(hd));
  EXPECT_EQ(b->stamp(hd), 7u);
  ASSERT_TRUE(b->wait(hd, soon()).is_ok());
  auto he = b->recv(0, Tag{1, 0, 0}, bytes_of(early));  // arrived before: unexpected
  auto hp = b->recv(0, Tag{3, 0, 0}, bytes_of(plain));
  while ((!b->test(he) || !b->test(hp)) && !until.passed()) b->drive(soon());
  EXPECT_EQ(b->stamp(he), 0xfeedull << 40);
  EXPECT_EQ(b->stamp(hp), 0u);
  ASSERT_TRUE(b->wait(he, soon()).is_ok());
  ASSERT_TRUE(b->wait(hp, soon()).is_ok());
  EXPECT_EQ(early, "early");
  EXPECT_EQ(direct, "direct");
  EXPECT_EQ(plain, "plain");
}

// A message that arrived whole before this side aborted its link is still delivered to a
// receive posted after (the failover link may have counted it as received and must read it
// back from the path it leaves); anything else fails with the abort.
TEST(TcpLinkTest, AMessageThatArrivedWholeBeforeALocalAbortIsStillDelivered) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  algorithms::PollableLink* a = pollable(c, 0);
  algorithms::PollableLink* b = pollable(c, 1);
  const std::string m = "arrived before the abort";
  ASSERT_TRUE(a->wait(a->send_stamped(1, Tag{1, 0, 0}, bytes_of(m), 5), soon()).is_ok());
  // Until b has it whole, as an early message (what the failover link counts).
  std::vector<algorithms::EarlyArrival> early;
  const Deadline until = soon();
  while (early.empty() && !until.passed()) {
    b->drive(Deadline::after(1ms));
    b->report_early(0, early);
  }
  ASSERT_EQ(early.size(), 1u);
  b->abort(error(StatusCode::kPeerLost, "test: this side gave the path up"));
  std::string got(m.size(), '\0');
  ASSERT_TRUE(b->wait(b->recv(0, Tag{1, 0, 0}, bytes_of(got)), soon()).is_ok());
  EXPECT_EQ(got, m);
  std::string more(4, '\0');
  EXPECT_EQ(b->wait(b->recv(0, Tag{2, 0, 0}, bytes_of(more)), soon()).code(),
            StatusCode::kPeerLost);
}

TEST(TcpLinkTest, LargeSimultaneousSendsDoNotDeadlock) {
  // Both sides wait on their 64 MiB send before posting the receive: progress must keep
  // draining incoming data while a send waits.
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  const std::size_t n = 64u << 20;
  expect_all_ok(run_ranks(2, [&](int r) {
    algorithms::Link& l = *c.links[r];
    std::vector<std::byte> out = pattern(n, r, 1 - r), in(n);
    TRIB_RETURN_IF_ERROR(l.wait(l.send(1 - r, algorithms::Tag{1, 0, 0}, out), soon()));
    TRIB_RETURN_IF_ERROR(l.wait(l.recv(1 - r, algorithms::Tag{1, 0, 0}, in), soon()));
    return in == pattern(n, 1 - r, r) ? Status() : error(StatusCode::kInternal, "corrupt");
  }));
}

TEST(TcpLinkTest, WrongSecretOnConnectorIsRejectedOnBothSides) {
  LogCapture logs;
  auto good = std::move(*transport::TcpEndpoint::listen(test_config(logs, 1, "right")));
  auto bad = std::move(*transport::TcpEndpoint::listen(test_config(logs, 0, "wrong")));
  const std::vector<std::string> addrs{bad->address(), good->address()};
  std::vector<Status> st = run_ranks(2, [&](int r) {
    // The honest side waits for a genuine peer until its deadline.
    auto l = r == 0 ? bad->connect_group(1, 0, addrs, Deadline::after(10s))
                    : good->connect_group(1, 1, addrs, Deadline::after(300ms));
    return l.status();
  });
  EXPECT_EQ(st[0].code(), StatusCode::kAuthFailed) << st[0].to_string();
  EXPECT_NE(st[0].message().find("rank 1 at " + addrs[1] + " rejected our secret"),
            std::string::npos)
      << st[0].to_string();
  EXPECT_EQ(st[1].code(), StatusCode::kAuthFailed) << st[1].to_string();
  EXPECT_TRUE(logs.contains("[rank 1] rejected connection from 127.0.0.1:",
                            "peer failed the cluster-secret challenge"))
      << logs.dump();
  EXPECT_TRUE(logs.contains("[rank 0] epoch 1: rank 1 at", "rejected our secret")) << logs.dump();
  EXPECT_EQ(good->stats().handshakes_rejected, 1u);
}

TEST(TcpLinkTest, WrongSecretOnAcceptorIsRejectedOnBothSides) {
  LogCapture logs;
  auto good = std::move(*transport::TcpEndpoint::listen(test_config(logs, 0, "right")));
  auto bad = std::move(*transport::TcpEndpoint::listen(test_config(logs, 1, "wrong")));
  const std::vector<std::string> addrs{good->address(), bad->address()};
  std::vector<Status> st = run_ranks(2, [&](int r) {
    auto l = r == 0 ? good->connect_group(1, 0, addrs, Deadline::after(10s))
                    : bad->connect_group(1, 1, addrs, Deadline::after(300ms));
    return l.status();
  });
  // Symmetric keys: neither side can tell whose secret is the wrong one; both fail auth.
  EXPECT_EQ(st[0].code(), StatusCode::kAuthFailed) << st[0].to_string();
  EXPECT_EQ(st[1].code(), StatusCode::kAuthFailed) << st[1].to_string();
  EXPECT_TRUE(
      logs.contains("[rank 1] rejected connection from", "failed the cluster-secret challenge"))
      << logs.dump();
}

TEST(TcpLinkTest, GarbageOnTheDataPortDropsOnlyThatConnection) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  RawPeer raw;
  ASSERT_FALSE(raw.connect(c.endpoints[2]->port()));
  std::string garbage(300, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 97 + 5);
  raw.write(garbage);
  // The group forms and works while the garbage connection is being refused.
  expect_all_ok(connect_all(c, 1));
  expect_all_ok(run_ranks(3, [&](int r) { return exchange(*c.links[r], 4096, 1); }));
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_TRUE(logs.contains("[rank 2] rejected connection from " + raw.local_address(),
                            "not a tributary handshake"))
      << logs.dump();
  EXPECT_EQ(c.endpoints[2]->stats().handshakes_rejected, 1u);
}

TEST(TcpLinkTest, OversizedFrameDropsThatPeerOnlyWithBadFrame) {
  RawGroup g;
  build_raw_group(g, 3, 4);
  algorithms::Link& l1 = *g.c.links[1];
  algorithms::Link& l2 = *g.c.links[2];
  std::string from0(8, '\0'), from2(5, '\0');
  const std::string to1 = "hello";
  auto r0 = l1.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(from0));
  auto r2 = l1.recv(2, algorithms::Tag{1, 0, 0}, bytes_of(from2));
  // Default max_frame_bytes is 1 GiB.
  g.raw[1]->write(transport::encode_frame_header(transport::FrameHeader{4, 1, 0, 0, (1ull << 30) + 1}));
  Status st = l1.wait(r0, soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
  EXPECT_NE(st.message().find("rank 0 at 127.0.0.1:1"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("exceeds"), std::string::npos) << st.to_string();
  EXPECT_TRUE(g.raw[1]->closed_by_peer());
  // Later operations on the dropped peer fail at once; the other peer carries on.
  std::string again(8, '\0');
  EXPECT_EQ(l1.wait(l1.recv(0, algorithms::Tag{2, 0, 0}, bytes_of(again)), soon()).code(),
            StatusCode::kBadFrame);
  EXPECT_TRUE(l2.wait(l2.send(1, algorithms::Tag{1, 0, 0}, bytes_of(to1)), soon()).is_ok());
  EXPECT_TRUE(l1.wait(r2, soon()).is_ok());
  EXPECT_EQ(from2, to1);
  EXPECT_EQ(g.c.endpoints[0]->stats().bad_frames, 1u);
  EXPECT_TRUE(g.logs.contains("[rank 1] dropping connection to rank 0 at 127.0.0.1:1", "bad frame"))
      << g.logs.dump();
}

TEST(TcpLinkTest, BadMagicMidStreamIsBadFrame) {
  RawGroup g;
  build_raw_group(g, 2, 1);
  std::string buf(3, '\0');
  auto h = g.c.links[1]->recv(0, algorithms::Tag{1, 0, 0}, bytes_of(buf));
  g.raw[1]->write(std::string(transport::kFrameHeaderBytes, 'x'));
  EXPECT_EQ(g.c.links[1]->wait(h, soon()).code(), StatusCode::kBadFrame);
}

TEST(TcpLinkTest, StaleEpochFramesAreDroppedNotDelivered) {
  RawGroup g;
  build_raw_group(g, 2, 5);
  std::string got(5, '\0');
  auto h = g.c.links[1]->recv(0, algorithms::Tag{1, 2, 3}, bytes_of(got));
  g.raw[1]->write_frame(transport::FrameHeader{4, 1, 2, 3, 5}, "stale");
  g.raw[1]->write_frame(transport::FrameHeader{6, 1, 2, 3, 5}, "newer");
  g.raw[1]->write_frame(transport::FrameHeader{5, 1, 2, 3, 5}, "fresh");
  ASSERT_TRUE(g.c.links[1]->wait(h, soon()).is_ok());
  EXPECT_EQ(got, "fresh");
  EXPECT_EQ(g.c.endpoints[0]->stats().frames_dropped_stale_epoch, 2u);
  EXPECT_TRUE(g.logs.contains("dropping frames of epoch 4 from rank 0")) << g.logs.dump();
}

TEST(TcpLinkTest, SizeOrCheckMismatchIsReportedToTheReceiver) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::byte> out(100), in(200), same(100);
  algorithms::Link& a = *c.links[0];
  algorithms::Link& b = *c.links[1];
  EXPECT_TRUE(a.wait(a.send(1, algorithms::Tag{1, 0, 7}, out), soon()).is_ok());
  Status st = b.wait(b.recv(0, algorithms::Tag{1, 0, 7}, in), soon());
  EXPECT_EQ(st.code(), StatusCode::kMismatch) << st.to_string();
  EXPECT_NE(st.message().find("sent 100 bytes"), std::string::npos) << st.to_string();
  // Posted first this time, and the sizes agree but the collective descriptor does not.
  auto r = b.recv(0, algorithms::Tag{2, 0, 8}, same);
  EXPECT_TRUE(a.wait(a.send(1, algorithms::Tag{2, 0, 9}, out), soon()).is_ok());
  EXPECT_EQ(b.wait(r, soon()).code(), StatusCode::kMismatch);
  // The stream stays in sync after a mismatch: the next message arrives intact.
  const std::string msg = "still fine";
  std::string got(msg.size(), '\0');
  auto r3 = b.recv(0, algorithms::Tag{3, 0, 0}, bytes_of(got));
  EXPECT_TRUE(a.wait(a.send(1, algorithms::Tag{3, 0, 0}, bytes_of(msg)), soon()).is_ok());
  EXPECT_TRUE(b.wait(r3, soon()).is_ok());
  EXPECT_EQ(got, msg);
}

TEST(TcpLinkTest, DestroyedPeerGivesPeerLostNamingIt) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::byte> buf(1 << 20);
  Status st;
  std::thread waiter([&] {
    st = c.links[1]->wait(c.links[1]->recv(0, algorithms::Tag{1, 0, 0}, buf), soon());
  });
  c.links[0].reset();
  c.endpoints[0].reset();
  waiter.join();
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
  EXPECT_NE(st.message().find("rank 0 at " + c.addresses[0]), std::string::npos) << st.to_string();
  // Rank 2 is unaffected.
  expect_all_ok(run_ranks(2, [&](int i) {
    algorithms::Link& l = *c.links[i + 1];
    std::vector<std::byte> x(10), y(10);
    const int peer = i == 0 ? 2 : 1;
    auto s = l.send(peer, algorithms::Tag{2, 0, 0}, x);
    TRIB_RETURN_IF_ERROR(l.wait(l.recv(peer, algorithms::Tag{2, 0, 0}, y), soon()));
    return l.wait(s, soon());
  }));
}

TEST(TcpLinkTest, WaitHonoursDeadlineAndNeverTouchesTheBufferAfterwards) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  algorithms::Link& a = *c.links[0];
  algorithms::Link& b = *c.links[1];
  std::string late(4, '.');
  const auto start = std::chrono::steady_clock::now();
  Status st = b.wait(b.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(late)), Deadline::after(50ms));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), StatusCode::kTimedOut) << st.to_string();
  EXPECT_NE(st.message().find("rank 0"), std::string::npos);
  EXPECT_GE(elapsed, 50ms);
  EXPECT_LT(elapsed, 2s);
  // The message arrives after its receiver gave up: it must not land in `late`.
  const std::string x = "LATE", y = "next";
  std::string got(4, '\0');
  auto r = b.recv(0, algorithms::Tag{2, 0, 0}, bytes_of(got));
  EXPECT_TRUE(a.wait(a.send(1, algorithms::Tag{1, 0, 0}, bytes_of(x)), soon()).is_ok());
  EXPECT_TRUE(a.wait(a.send(1, algorithms::Tag{2, 0, 0}, bytes_of(y)), soon()).is_ok());
  EXPECT_TRUE(b.wait(r, soon()).is_ok());
  EXPECT_EQ(got, y);
  EXPECT_EQ(late, "....");
}

TEST(TcpLinkTest, AbortFromAnotherThreadWakesTheWaiterAndTellsPeers) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::byte> b0(64), b1(64);
  Status st0, st1;
  std::thread w0([&] {
    st0 = c.links[0]->wait(c.links[0]->recv(1, algorithms::Tag{1, 0, 0}, b0), Deadline::after(60s));
  });
  std::thread w1([&] {
    st1 = c.links[1]->wait(c.links[1]->recv(0, algorithms::Tag{1, 0, 0}, b1), Deadline::after(60s));
  });
  const auto start = std::chrono::steady_clock::now();
  c.links[0]->abort(error(StatusCode::kAborted, "new view"));
  w0.join();
  w1.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(st0.code(), StatusCode::kAborted);
  EXPECT_EQ(st0.message(), "new view");
  EXPECT_EQ(st1.code(), StatusCode::kPeerLost) << st1.to_string();
  // Operations after abort fail at once.
  EXPECT_EQ(c.links[0]->wait(c.links[0]->send(1, algorithms::Tag{2, 0, 0}, b0), soon()).code(),
            StatusCode::kAborted);
}

TEST(TcpLinkTest, AnErrorAbortTellsPeersTheCodeAndReason) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::byte> b1(64), b2(64);
  Status st1, st2;
  std::thread w1([&] {
    st1 = c.links[1]->wait(c.links[1]->recv(0, algorithms::Tag{1, 0, 0}, b1), Deadline::after(60s));
  });
  std::thread w2([&] {
    st2 = c.links[2]->wait(c.links[2]->recv(0, algorithms::Tag{1, 0, 0}, b2), Deadline::after(60s));
  });
  const auto start = std::chrono::steady_clock::now();
  c.links[0]->abort(error(StatusCode::kMismatch, "rank 2 sent 8 bytes, expected 4"));
  w1.join();
  w2.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (const Status* st : {&st1, &st2}) {
    EXPECT_EQ(st->code(), StatusCode::kMismatch) << st->to_string();
    EXPECT_EQ(st->message(), "rank 0 aborted: rank 2 sent 8 bytes, expected 4");
  }
  // Later operations on that peer fail the same way.
  EXPECT_EQ(c.links[1]->wait(c.links[1]->recv(0, algorithms::Tag{2, 0, 0}, b1), soon()).code(),
            StatusCode::kMismatch);
}

TEST(TcpLinkTest, ARelayedAbortKeepsItsOrigin) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::byte> b1(64), b2(64);
  // Rank 1 learns of rank 0's error, fails with it and aborts (as a collective does).
  c.links[0]->abort(error(StatusCode::kTimedOut, "no message from rank 2"));
  Status st1 = c.links[1]->wait(c.links[1]->recv(0, algorithms::Tag{1, 0, 0}, b1), soon());
  ASSERT_EQ(st1.code(), StatusCode::kTimedOut) << st1.to_string();
  c.links[1]->abort(st1);
  Status st2 = c.links[2]->wait(c.links[2]->recv(1, algorithms::Tag{1, 0, 0}, b2), soon());
  EXPECT_EQ(st2.code(), StatusCode::kTimedOut) << st2.to_string();
  EXPECT_EQ(st2.message(), "rank 0 aborted: no message from rank 2");
}

TEST(TcpLinkTest, APeerLeavingWithNothingPendingIsNotLogged) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  expect_all_ok(run_ranks(3, [&](int r) { return exchange(*c.links[r], 1000, 1); }));
  c.links[0]->abort(error(StatusCode::kAborted, "worker left"));
  c.links[0].reset();
  c.endpoints[0].reset();
  // Rank 1 notices the close while servicing its other peer; nothing was pending on rank 0.
  expect_all_ok(run_ranks(2, [&](int i) {
    algorithms::Link& l = *c.links[i + 1];
    std::vector<std::byte> x(10), y(10);
    const int peer = i == 0 ? 2 : 1;
    auto s = l.send(peer, algorithms::Tag{2, 0, 0}, x);
    TRIB_RETURN_IF_ERROR(l.wait(l.recv(peer, algorithms::Tag{2, 0, 0}, y), soon()));
    return l.wait(s, soon());
  }));
  EXPECT_FALSE(logs.contains("dropping connection")) << logs.dump();
  // An operation on the departed peer still fails, naming it.
  std::vector<std::byte> z(10);
  Status st = c.links[1]->wait(c.links[1]->recv(0, algorithms::Tag{3, 0, 0}, z), soon());
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.to_string();
}

TEST(TcpLinkTest, FutureEpochConnectionsAreParkedUntilThatEpoch) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  Status st0;
  std::thread early([&] {
    auto l = c.endpoints[0]->connect_group(3, 0, c.addresses, soon());
    st0 = l.status();
    if (l.is_ok()) c.links[0] = std::move(*l);
  });
  const Deadline give_up = soon();
  while (c.endpoints[1]->stats().connections_parked == 0 && !give_up.passed())
    std::this_thread::yield();
  ASSERT_EQ(c.endpoints[1]->stats().connections_parked, 1u);
  auto l1 = c.endpoints[1]->connect_group(3, 1, c.addresses, soon());
  early.join();
  ASSERT_TRUE(st0.is_ok()) << st0.to_string();
  ASSERT_TRUE(l1.is_ok()) << l1.status().to_string();
  c.links[1] = std::move(*l1);
  EXPECT_EQ(c.endpoints[1]->stats().connections_parked, 0u);
  expect_all_ok(run_ranks(2, [&](int r) { return exchange(*c.links[r], 1000, 1); }));
}

TEST(TcpLinkTest, OlderEpochsAreRefused) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 5));
  // A straggler still dialing epoch 4 is told the endpoint moved on.
  RawPeer raw;
  ASSERT_FALSE(raw.connect(c.endpoints[1]->port()));
  auto reply = raw.handshake("s3cret", 4, 0, 1, 2);
  ASSERT_TRUE(reply.is_ok()) << reply.status().to_string();
  EXPECT_EQ(reply->type, transport::HandshakeType::kReject);
  EXPECT_EQ(reply->reason, transport::RejectReason::kStaleEpoch);
  EXPECT_EQ(reply->epoch, 5u);
  EXPECT_TRUE(logs.contains("[rank 1] rejected connection from", "epoch 4 is older"))
      << logs.dump();
  // Building an older epoch here fails too, locally and when dialing a peer that moved on.
  auto local = c.endpoints[1]->connect_group(4, 1, c.addresses, soon());
  EXPECT_EQ(local.status().code(), StatusCode::kStaleEpoch);
  LogCapture logs2;
  auto late = std::move(*transport::TcpEndpoint::listen(test_config(logs2, 0)));
  auto dialed = late->connect_group(4, 0, {late->address(), c.addresses[1]}, soon());
  EXPECT_EQ(dialed.status().code(), StatusCode::kStaleEpoch) << dialed.status().to_string();
  EXPECT_NE(dialed.status().message().find("moved on to epoch 5"), std::string::npos);
}

TEST(TcpLinkTest, MissingPeerTimesOutNamingIt) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  // Rank 2 never calls connect_group: rank 0's dial is parked there, never accepted.
  std::vector<Status> st = run_ranks(2, [&](int r) {
    return c.endpoints[r]->connect_group(1, r, c.addresses, Deadline::after(200ms)).status();
  });
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kTimedOut) << s.to_string();
    EXPECT_NE(s.message().find("rank 2 at " + c.addresses[2]), std::string::npos) << s.to_string();
  }
}

TEST(TcpLinkTest, ACancelledConnectSaysWhatItStillLacked) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  // Rank 1's address is a listener that never accepts: rank 0's dial completes in its
  // backlog and then hears nothing. Once it is there (the group has begun), a newer view
  // makes the group moot (cancel_connect), and the error names the peer it still lacked.
  const int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(silent, 4), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string unanswered = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  Result<std::unique_ptr<algorithms::Link>> got = error(StatusCode::kInternal, "not run");
  std::thread dialer([&] {
    got = c.endpoints[0]->connect_group(1, 0, {c.addresses[0], unanswered}, soon());
  });
  pollfd pending{silent, POLLIN, 0};
  EXPECT_EQ(::poll(&pending, 1, 20000), 1) << "rank 0 never dialled";
  c.endpoints[0]->cancel_connect(2);
  dialer.join();
  ::close(silent);
  ASSERT_EQ(got.status().code(), StatusCode::kAborted) << got.status().to_string();
  EXPECT_NE(got.status().message().find("superseded by view 2"), std::string::npos)
      << got.status().to_string();
  EXPECT_NE(got.status().message().find("it still lacked rank 1 at " + unanswered),
            std::string::npos)
      << got.status().to_string();
}

TEST(TcpLinkTest, NewEpochGetsNewLinksWhileOldOnesStayUsable) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::unique_ptr<algorithms::Link>> old = std::move(c.links);
  c.links.resize(3);
  expect_all_ok(connect_all(c, 2));
  expect_all_ok(run_ranks(3, [&](int r) { return exchange(*c.links[r], 777, 1); }));
  expect_all_ok(run_ranks(3, [&](int r) { return exchange(*old[r], 777, 1); }));
  EXPECT_EQ(c.endpoints[0]->stats().epoch, 2u);
}

// Where a group has a core per rank, its connections whose two ends are on this host get
// TcpEndpointConfig::same_host_congestion (no pacing on loopback), on both sides and on a
// reconnected pair too; elsewhere they keep the system's default.
TEST(TcpLinkTest, SameHostConnectionsTakeTheConfiguredCongestionControlWithACorePerRank) {
  auto congestion_of = [](int fd) {
    char name[32] = {};
    socklen_t len = sizeof(name);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return std::string("?");
    return std::string(name, ::strnlen(name, len));
  };
  // Both ends of the connection to rank 1's listener: rank 0's dialled socket and rank
  // 1's accepted one, found by port.
  auto both_ends = [&](std::uint16_t port) {
    std::vector<std::string> out;
    for (int fd = 3; fd < 1024; ++fd) {
      sockaddr_in local{}, peer{};
      socklen_t a = sizeof(local), b = sizeof(peer);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &a) != 0 ||
          ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &b) != 0 ||
          local.sin_family != AF_INET) {
        continue;
      }
      if (ntohs(peer.sin_port) == port || ntohs(local.sin_port) == port)
        out.push_back(congestion_of(fd));
    }
    return out;
  };
  std::string system_default;
  std::ifstream("/proc/sys/net/ipv4/tcp_congestion_control") >> system_default;
  ASSERT_FALSE(system_default.empty());
  for (const bool core_per_rank : {true, false}) {
    LogCapture logs;
    Cluster c;
    for (int r = 0; r < 2; ++r) {
      transport::TcpEndpointConfig config = test_config(logs, r);
      config.same_host_congestion = "reno";
      auto ep = transport::TcpEndpoint::listen(config);
      ASSERT_TRUE(ep.is_ok()) << ep.status().to_string();
      c.addresses.push_back((*ep)->address());
      c.endpoints.push_back(std::move(*ep));
    }
    c.links.resize(2);
    std::vector<std::vector<std::string>> addresses{{c.addresses[0]}, {c.addresses[1]}};
    transport::TcpGroupOptions options;
    options.core_per_rank = core_per_rank;
    expect_all_ok(run_ranks(2, [&](int r) -> Status {
      TRIB_ASSIGN_OR_RETURN(c.links[r], c.endpoints[r]->connect_group(
                                            1, r, addresses, Deadline::after(10s), {}, options));
      return Status();
    }));
    const std::string expected = core_per_rank ? "reno" : system_default;
    EXPECT_EQ(both_ends(port_of(c.addresses[1])), (std::vector<std::string>{expected, expected}))
        << "core per rank: " << core_per_rank;
    if (core_per_rank) {
      std::vector<transport::PeerSocket> got = cut_and_reconnect_pair01(c, 1);
      for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(transport::replace_peer_socket(*c.links[r], std::move(got[r])).is_ok());
      }
      EXPECT_EQ(both_ends(port_of(c.addresses[1])), (std::vector<std::string>{"reno", "reno"}))
          << "after a reconnect";
      expect_all_ok(run_ranks(2, [&](int r) { return exchange(*c.links[r], 1000, 1); }));
    }
  }
  EXPECT_EQ(transport::TcpEndpointConfig{}.same_host_congestion, "cubic");
}

// A pair whose connection failed gets a new one at the same epoch (TcpEndpoint::reconnect,
// both ends, the lower rank dialling) and the link carries the pair over it again
// (replace_peer_socket); the other pairs never noticed.
TEST(TcpLinkTest, AFailedPairReconnectsAtTheSameEpochAndCarriesMessagesAgain) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<transport::PeerSocket> got = cut_and_reconnect_pair01(c, 1);
  ASSERT_EQ(got.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_GE(got[r].fd, 0);
    ASSERT_TRUE(transport::replace_peer_socket(*c.links[r], std::move(got[r])).is_ok());
  }
  expect_all_ok(run_ranks(3, [&](int r) { return exchange(*c.links[r], 100000, 2); }));
  EXPECT_TRUE(logs.contains("a new connection to rank 1")) << logs.dump();
  // Not for a link that is not TCP, nor for its own rank: refused, the socket closed.
  algorithms::MemoryFabric fabric(2);
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_EQ(transport::replace_peer_socket(fabric.link(0), {1, fds[0], "x", nullptr}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(transport::replace_peer_socket(*c.links[0], {0, fds[1], "x", nullptr}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);
  EXPECT_EQ(::fcntl(fds[1], F_GETFD), -1);
}

// A reconnect names the epoch it belongs to: one older than what the endpoint has built
// since is stale, and a peer that never calls leaves it to time out naming that peer, with
// nothing else of the endpoint disturbed.
TEST(TcpLinkTest, AReconnectOfAnOlderEpochIsStaleAndOneNobodyAnswersTimesOut) {
  LogCapture logs;
  Cluster c = make_cluster(2, logs);
  expect_all_ok(connect_all(c, 1));
  std::vector<std::vector<std::string>> addresses{{c.addresses[0]}, {c.addresses[1]}};
  auto alone = c.endpoints[0]->reconnect(1, 0, addresses, {1}, Deadline::after(200ms));
  EXPECT_EQ(alone.status().code(), StatusCode::kTimedOut) << alone.status().to_string();
  EXPECT_NE(alone.status().message().find("rank 1"), std::string::npos);
  auto waiting = c.endpoints[1]->reconnect(1, 1, addresses, {0}, Deadline::after(200ms));
  EXPECT_EQ(waiting.status().code(), StatusCode::kTimedOut) << waiting.status().to_string();
  EXPECT_EQ(c.endpoints[0]->reconnect(1, 0, addresses, {}, soon()).status().code(),
            StatusCode::kInvalidArgument);
  c.links.clear();
  c.links.resize(2);
  expect_all_ok(connect_all(c, 2));
  EXPECT_EQ(c.endpoints[0]->reconnect(1, 0, addresses, {1}, soon()).status().code(),
            StatusCode::kStaleEpoch);
  expect_all_ok(run_ranks(2, [&](int r) { return exchange(*c.links[r], 1000, 3); }));
}

// recv_combine reduces out of the 64 KiB staging buffer: float64 payloads several times
// larger (elements split between reads), posted before the message, in place with the
// operand last, and taken from a message that arrived early (whole, or still arriving);
// the bits of receiving and then reducing.
TEST(TcpLinkTest, ACombiningReceiveGivesTheBitsOfReceiveThenReduce) {
  LogCapture logs;
  Cluster c = make_cluster(3, logs);
  expect_all_ok(connect_all(c, 1));
  expect_combining_receives_match_receive_then_reduce(
      {c.links[0].get(), c.links[1].get(), c.links[2].get()}, 100003, 20s);
}

TEST(TcpLinkTest, AllReduceOverTcpMatchesAcrossAlgorithmsAndSizes) {
  for (int n : {2, 3, 4}) {
    LogCapture logs;
    Cluster c = make_cluster(n, logs);
    expect_all_ok(connect_all(c, 1));
    std::uint64_t seq = 1;
    for (int a = 0; a < algorithms::kNumAllReduceAlgorithms; ++a) {
      for (std::size_t count : {std::size_t{1}, std::size_t{1023}, std::size_t{300000}}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " algorithm=" +
                     std::string(to_string(static_cast<algorithms::AllReduceAlgorithm>(a))) +
                     " count=" + std::to_string(count));
        std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
        expect_all_ok(run_ranks(n, [&](int r) {
          std::vector<float> in(count);
          for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i % 97) * (r + 1));
          out[r].assign(count, 0.0f);
          algorithms::CollectiveOptions opt;
          opt.seq = seq;
          opt.algorithm = static_cast<algorithms::AllReduceAlgorithm>(a);
          opt.chunk_bytes = 16 * 1024;  // many chunks, so pipelining runs over the sockets
          opt.deadline = soon();
          return all_reduce(*c.links[r], in.data(), out[r].data(), count, DType::kFloat32,
                            ReduceOp::kSum, opt);
        }));
        ++seq;
        const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
        for (std::size_t i = 0; i < count; i += 1 + count / 50) {
          EXPECT_EQ(out[0][i], static_cast<float>(i % 97) * ranks_sum) << "i=" << i;
        }
        for (int r = 1; r < n; ++r) EXPECT_EQ(out[r], out[0]) << "rank " << r << " differs";
      }
    }
  }
}

}  // namespace
}  // namespace tributary::testing
