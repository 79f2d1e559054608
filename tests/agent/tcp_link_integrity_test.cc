// What a TcpLink does with frames it must not believe: corrupted in transit (the CRC-32Cs
// of frame.h, on the direct and the unexpected path, in the header and in the payload), and
// unsolicited messages beyond the per-peer bound (the sender is held back by TCP, the
// receiver's memory stays bounded, and the stream resumes when recvs are posted).
#include <sys/socket.h>
#include <sys/time.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "algorithms/collectives.h"
#include "tests/agent/tcp_test_util.h"
#include "tests/hostile/tcp_proxy.h"

namespace tributary::testing {
namespace {

using transport::FrameHeader;
using std::chrono::milliseconds;

TEST(TcpLinkIntegrity, ACorruptedPayloadIsABadFrameNamingThePeerAndNeverDelivered) {
  RawGroup g;
  build_raw_group(g, 3, 4);
  algorithms::Link& l1 = *g.c.links[1];
  algorithms::Link& l2 = *g.c.links[2];
  const std::string sent(64 << 10, 'g');
  std::string got(sent.size(), '\0');
  auto r0 = l1.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(got));
  g.raw[1]->write_frame(transport::FrameHeader{4, 1, 0, 0, sent.size()}, sent, /*corrupt_at=*/40000);
  Status st = l1.wait(r0, soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
  EXPECT_NE(st.message().find("rank 0 at 127.0.0.1:1 to rank 1"), std::string::npos)
      << st.to_string();
  EXPECT_NE(st.message().find("fails its CRC-32C check"), std::string::npos) << st.to_string();
  EXPECT_TRUE(g.raw[1]->closed_by_peer()) << "the link to the corrupting peer stays up";
  const transport::TcpEndpointStats stats = g.c.endpoints[0]->stats();
  EXPECT_EQ(stats.crc_failures, 1u);
  EXPECT_EQ(stats.bad_frames, 1u);
  EXPECT_TRUE(g.logs.contains("[rank 1] dropping connection to rank 0", "CRC-32C"))
      << g.logs.dump();
  // The other peer is not disturbed.
  const std::string hello = "hello";
  std::string from2(hello.size(), '\0');
  auto r2 = l1.recv(2, algorithms::Tag{1, 0, 0}, bytes_of(from2));
  EXPECT_TRUE(l2.wait(l2.send(1, algorithms::Tag{1, 0, 0}, bytes_of(hello)), soon()).is_ok());
  EXPECT_TRUE(l1.wait(r2, soon()).is_ok());
  EXPECT_EQ(from2, hello);
}

// A combining receive reduces out of staging after the checksum saw the bytes, but the
// verdict comes at the frame's end: a corrupted payload still fails the receive.
TEST(TcpLinkIntegrity, ACorruptedPayloadFailsACombiningReceiveToo) {
  RawGroup g;
  build_raw_group(g, 2, 4);
  algorithms::Link& l1 = *g.c.links[1];
  ASSERT_TRUE(l1.combines());
  const std::string sent(256 << 10, 'g');
  std::string got(sent.size(), '\0');
  const std::string operand(sent.size(), 'o');
  auto r0 = l1.recv_combine(
      0, algorithms::Tag{1, 0, 0}, bytes_of(got),
      algorithms::Combine{reinterpret_cast<const std::byte*>(operand.data()), DType::kUInt8,
                          ReduceOp::kMax, true});
  g.raw[1]->write_frame(transport::FrameHeader{4, 1, 0, 0, sent.size()}, sent, /*corrupt_at=*/200000);
  const Status st = l1.wait(r0, soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
  EXPECT_NE(st.message().find("fails its CRC-32C check"), std::string::npos) << st.to_string();
}

TEST(TcpLinkIntegrity, ACorruptedUnexpectedMessageFailsThePeerInsteadOfWaitingForItsRecv) {
  RawGroup g;
  build_raw_group(g, 2, 1);
  algorithms::Link& l1 = *g.c.links[1];
  // Seq 1 arrives before its recv (buffered) and is corrupted; seq 2 behind it is fine.
  g.raw[1]->write_frame(transport::FrameHeader{1, 1, 0, 0, 300}, std::string(300, 'a'), 0);
  g.raw[1]->write_frame(transport::FrameHeader{1, 2, 0, 0, 3}, "abc");
  std::string two(3, '\0');
  Status st = l1.wait(l1.recv(0, algorithms::Tag{2, 0, 0}, bytes_of(two)), soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
  EXPECT_NE(st.message().find("seq 1 slot 0, 300 bytes"), std::string::npos) << st.to_string();
  std::string one(300, '\0');
  EXPECT_EQ(l1.wait(l1.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(one)), soon()).code(),
            StatusCode::kBadFrame);
  EXPECT_EQ(one, std::string(300, '\0')) << "corrupted bytes were delivered";
  EXPECT_EQ(g.c.endpoints[0]->stats().crc_failures, 1u);
}

// A large payload's CRC-32C is computed as its bytes go out (frame.h: a trailer), in as
// many pieces as the socket takes; a small one's before the frame leaves. Either way the
// trailer that follows the payload is its checksum.
TEST(TcpLinkIntegrity, TheTrailerIsThePayloadsCrcWhateverPiecesItWentOutIn) {
  RawGroup g;
  build_raw_group(g, 2, 1);
  algorithms::Link& l1 = *g.c.links[1];
  std::string big(24 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) >> 7);
  const std::string small(1000, 's');
  const std::string empty;
  auto s1 = l1.send(0, algorithms::Tag{1, 0, 0}, bytes_of(big));
  auto s2 = l1.send(0, algorithms::Tag{2, 0, 0}, bytes_of(small));
  auto s3 = l1.send(0, algorithms::Tag{3, 0, 0}, bytes_of(empty));
  // The sends complete while this thread reads (24 MiB is more than the socket buffers).
  std::thread reader([&] {
    for (const std::string* want : {static_cast<const std::string*>(&big), &small, &empty}) {
      Result<RawPeer::ReadFrame> f = g.raw[1]->read_frame();
      ASSERT_TRUE(f.is_ok()) << f.status().to_string();
      EXPECT_EQ(f->header.length, want->size());
      EXPECT_TRUE(f->payload == *want) << "payload of " << want->size() << " bytes differs";
    }
  });
  EXPECT_TRUE(l1.wait(s1, soon()).is_ok());
  EXPECT_TRUE(l1.wait(s2, soon()).is_ok());
  EXPECT_TRUE(l1.wait(s3, soon()).is_ok());
  reader.join();
}

// A send whose waiter gave up while its frame was half out is finished from a private
// copy (link.h); the part of its checksum not yet computed is computed over that copy, so
// the frame still checks.
TEST(TcpLinkIntegrity, AHalfSentFrameFinishedFromACopyStillChecks) {
  RawGroup g;
  build_raw_group(g, 2, 1);
  algorithms::Link& l1 = *g.c.links[1];
  std::string big(32 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + (i >> 12));
  const std::string want = big;
  auto s1 = l1.send(0, algorithms::Tag{1, 0, 0}, bytes_of(big));
  // Nobody reads yet: the socket buffers fill and the wait gives up mid-frame.
  EXPECT_EQ(l1.wait(s1, Deadline::after(milliseconds(100))).code(), StatusCode::kTimedOut);
  std::fill(big.begin(), big.end(), 'x');  // the caller's buffer is theirs again
  const std::string next = "after";
  auto s2 = l1.send(0, algorithms::Tag{2, 0, 0}, bytes_of(next));
  std::thread reader([&] {
    Result<RawPeer::ReadFrame> f = g.raw[1]->read_frame();
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    EXPECT_TRUE(f->payload == want) << "the abandoned frame's payload differs";
    Result<RawPeer::ReadFrame> f2 = g.raw[1]->read_frame();
    ASSERT_TRUE(f2.is_ok()) << f2.status().to_string();
    EXPECT_EQ(f2->payload, next);
  });
  EXPECT_TRUE(l1.wait(s2, soon()).is_ok());
  reader.join();
}

TEST(TcpLinkIntegrity, AFlippedBitInAHeaderIsCaughtBeforeItsLengthIsBelieved) {
  RawGroup g;
  build_raw_group(g, 2, 1);
  algorithms::Link& l1 = *g.c.links[1];
  std::string got(8, '\0');
  auto h = l1.recv(0, algorithms::Tag{1, 0, 0}, bytes_of(got));
  transport::FrameHeaderBytes header = transport::encode_frame_header(transport::FrameHeader{1, 1, 0, 0, 8});
  header[35] ^= std::byte{0x04};  // length 8 + 2^26: the stream would wait for 64 MiB
  g.raw[1]->write(header);
  Status st = l1.wait(h, soon());
  EXPECT_EQ(st.code(), StatusCode::kBadFrame) << st.to_string();
  EXPECT_NE(st.message().find("header fails its CRC-32C check"), std::string::npos)
      << st.to_string();
}

// A peer streams messages nobody asked for. The receiver holds at most the bound, the
// sender's writes stall (TCP flow control), and the messages are still delivered in full
// once their recvs are posted.
TEST(TcpLinkIntegrity, UnsolicitedMessagesAreBoundedAndDeliveredWhenAskedFor) {
  constexpr std::uint64_t kBound = 4 << 20;
  constexpr std::size_t kFrame = 1 << 20;
  RawGroup g;
  build_raw_group(g, 2, 1, kBound);
  algorithms::Link& l1 = *g.c.links[1];
  const int fd = g.raw[1]->native_handle();
  timeval tv{0, 300 * 1000};  // a write that makes no progress for 300 ms: the reader stopped
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
  std::atomic<bool> writer_done{false};
  std::uint64_t whole_frames = 0;
  std::uint64_t written = 0;
  std::thread writer([&] {
    // Up to 1 GiB of 1 MiB frames, seq 1, 2, ...: each frame's bytes are its seq.
    for (std::uint64_t seq = 1; written < (1ull << 30); ++seq) {
      const std::string payload(kFrame, static_cast<char>(seq));
      const transport::FrameHeaderBytes hb = transport::encode_frame_header(transport::FrameHeader{1, seq, 0, 0, kFrame});
      const transport::FrameTrailerBytes tb = transport::encode_frame_trailer(crc32c(bytes_of(payload)));
      std::string frame(reinterpret_cast<const char*>(hb.data()), hb.size());
      frame += payload;
      frame.append(reinterpret_cast<const char*>(tb.data()), tb.size());
      std::size_t off = 0;
      while (off < frame.size()) {
        const ssize_t n = ::send(fd, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      written += off;
      if (off < frame.size()) break;
      whole_frames = seq;
    }
    writer_done = true;
  });
  // Drive the link (it reads only inside wait) with a recv that nothing answers.
  std::string never(1, '\0');
  while (!writer_done) {
    (void)l1.wait(l1.recv(0, algorithms::Tag{1u << 30, 0, 0}, bytes_of(never)),
                  Deadline::after(milliseconds(50)));
  }
  writer.join();
  EXPECT_LT(written, 64ull << 20) << "the receiver kept reading unsolicited messages";
  EXPECT_GE(g.c.endpoints[0]->stats().unexpected_stalls, 1u);
  ASSERT_GE(whole_frames, 4u);
  // Asked for in the order they were sent, every whole frame arrives intact. (A recv for
  // a frame behind the stalled one would wait for its deadline: tcp_link.h.)
  std::string got(kFrame, '\0');
  for (std::uint64_t seq = 1; seq <= whole_frames; ++seq) {
    Status st = l1.wait(l1.recv(0, algorithms::Tag{seq, 0, 0}, bytes_of(got)), soon());
    ASSERT_TRUE(st.is_ok()) << "seq " << seq << ": " << st.to_string();
    ASSERT_EQ(got, std::string(kFrame, static_cast<char>(seq))) << "seq " << seq;
  }
}

// Between two real endpoints, one bit flipped on the wire inside an all-reduce: the ranks
// fail the collective (rank 1 with kBadFrame naming rank 0), none keeps a wrong sum, and
// the same all-reduce over the next epoch's links succeeds with the right one.
TEST(TcpLinkIntegrity, AFlippedBitOnTheWireFailsTheAllReduceInsteadOfChangingItsSum) {
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = 300000;
  LogCapture logs;
  Cluster c = make_cluster(kRanks, logs);
  const std::vector<std::string> real = c.addresses;
  // Rank 0 dials rank 1 through the proxy; byte 1,000 of the first frame's payload (after
  // the connector's two 64-byte handshake messages and the 56-byte header) is flipped.
  hostile::TcpProxy proxy(c.endpoints[1]->port());
  proxy.corrupt_at(2 * transport::kHandshakeBytes + transport::kFrameHeaderBytes + 1000);
  c.addresses[1] = "127.0.0.1:" + std::to_string(proxy.port());
  expect_all_ok(connect_all(c, 1));
  auto run = [&](std::uint64_t seq, std::vector<std::vector<float>>& out) {
    return run_ranks(kRanks, [&](int r) {
      std::vector<float> in(kCount);
      for (std::size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i % 89) * (r + 1));
      out[r].assign(kCount, 0.0f);
      algorithms::CollectiveOptions opt;
      opt.seq = seq;
      opt.chunk_bytes = 64 * 1024;
      opt.deadline = Deadline::after(std::chrono::seconds(5));
      Status st = all_reduce(*c.links[r], in.data(), out[r].data(), kCount, DType::kFloat32,
                             ReduceOp::kSum, opt);
      if (!st.is_ok()) c.links[r]->abort(st);  // as the Worker does: the peers learn at once
      return st;
    });
  };
  auto right = [&](const std::vector<float>& v) {
    for (std::size_t i = 0; i < kCount; ++i) {
      if (v[i] != static_cast<float>(i % 89) * (kRanks * (kRanks + 1) / 2)) return false;
    }
    return true;
  };
  std::vector<std::vector<float>> out(kRanks);
  const std::vector<Status> st = run(1, out);
  ASSERT_TRUE(proxy.corrupted());
  EXPECT_EQ(st[1].code(), StatusCode::kBadFrame) << st[1].to_string();
  EXPECT_NE(st[1].message().find("from rank 0"), std::string::npos) << st[1].to_string();
  EXPECT_NE(st[1].message().find("CRC-32C"), std::string::npos) << st[1].to_string();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(!st[r].is_ok() || right(out[r])) << "rank " << r << " kept a wrong sum";
  }
  EXPECT_EQ(c.endpoints[1]->stats().crc_failures, 1u);
  // The next epoch, over the direct path: the same inputs give the right sum everywhere.
  c.addresses = real;
  expect_all_ok(connect_all(c, 2));
  expect_all_ok(run(1, out));
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(right(out[r])) << "rank " << r;
}

}  // namespace
}  // namespace tributary::testing
