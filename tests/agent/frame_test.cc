#include "transport/tcp/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/crc32c.h"

namespace tributary::agent {
namespace {

transport::FrameHeader sample_header() {
  transport::FrameHeader h{7, 0x1122334455667788ull, 9, 0xdeadbeef, 4096};
  h.stamp = 0xa1b2c3d4e5f60718ull;
  return h;
}

// Recomputes the header's own CRC after a test changed its bytes, so that the field
// checks behind the CRC are what the test exercises.
void reseal(transport::FrameHeaderBytes& b) {
  const std::uint32_t crc = crc32c(std::span<const std::byte>(b.data(), transport::kFrameHeaderBytes - 4));
  for (int i = 0; i < 4; ++i) b[transport::kFrameHeaderBytes - 4 + i] = static_cast<std::byte>(crc >> (8 * i));
}

TEST(FrameTest, HeaderRoundTripsLittleEndian) {
  const transport::FrameHeaderBytes b = transport::encode_frame_header(sample_header());
  // Little-endian on the wire whatever the host: magic "TRBF" reads as text.
  EXPECT_EQ(static_cast<char>(b[0]), 'T');
  EXPECT_EQ(static_cast<char>(b[3]), 'F');
  EXPECT_EQ(b[16], std::byte{0x88});
  Result<transport::FrameHeader> h = transport::decode_frame_header(b, 1 << 20);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->epoch, 7u);
  EXPECT_EQ(h->seq, 0x1122334455667788ull);
  EXPECT_EQ(h->slot, 9u);
  EXPECT_EQ(h->check, 0xdeadbeefu);
  EXPECT_EQ(h->length, 4096u);
  EXPECT_EQ(h->stamp, 0xa1b2c3d4e5f60718ull);
  EXPECT_EQ(b[40], std::byte{0x18});  // the stamp, little-endian after the length
}

TEST(FrameTest, ThePayloadCrcIsATrailerAndItsHeaderBytesAreReserved) {
  EXPECT_EQ(transport::frame_body_bytes(0), 0u);  // an empty payload has no trailer
  EXPECT_EQ(transport::frame_body_bytes(4096), 4096u + transport::kFrameTrailerBytes);
  const transport::FrameTrailerBytes t = transport::encode_frame_trailer(0x01020304u);
  EXPECT_EQ(t[0], std::byte{0x04});  // little-endian
  EXPECT_EQ(transport::decode_frame_trailer(t), 0x01020304u);
  // Where version 3 carried the payload's CRC, the header now has reserved bytes.
  transport::FrameHeaderBytes b = transport::encode_frame_header(sample_header());
  for (std::size_t i = 48; i < 52; ++i) EXPECT_EQ(b[i], std::byte{0}) << i;
  b[49] = std::byte{1};
  reseal(b);
  Result<transport::FrameHeader> d = transport::decode_frame_header(b, ~0ull);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("reserved"), std::string::npos) << d.status().to_string();
}

TEST(FrameTest, EveryFlippedHeaderBitIsRefused) {
  const transport::FrameHeaderBytes good = transport::encode_frame_header(sample_header());
  for (std::size_t bit = 0; bit < 8 * transport::kFrameHeaderBytes; ++bit) {
    transport::FrameHeaderBytes b = good;
    b[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    Result<transport::FrameHeader> d = transport::decode_frame_header(b, ~0ull);
    ASSERT_FALSE(d.is_ok()) << "bit " << bit;
    EXPECT_EQ(d.status().code(), StatusCode::kBadFrame);
    // Past magic and version, it is the CRC that catches it.
    if (bit >= 40) {
      EXPECT_NE(d.status().message().find("CRC-32C"), std::string::npos) << d.status().to_string();
    }
  }
}

TEST(FrameTest, RejectsOversizedLength) {
  transport::FrameHeader h = sample_header();
  h.length = (1ull << 20) + 1;
  Result<transport::FrameHeader> d = transport::decode_frame_header(transport::encode_frame_header(h), 1 << 20);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kBadFrame);
  EXPECT_NE(d.status().message().find("exceeds"), std::string::npos);
  h.length = ~0ull;
  EXPECT_FALSE(transport::decode_frame_header(transport::encode_frame_header(h), ~0ull - 1).is_ok());
}

TEST(FrameTest, RejectsBadMagicVersionAndReservedBits) {
  for (std::size_t byte : {0u, 3u, 4u, 5u, 6u, 7u}) {
    transport::FrameHeaderBytes b = transport::encode_frame_header(sample_header());
    b[byte] ^= std::byte{0x40};
    reseal(b);
    Result<transport::FrameHeader> d = transport::decode_frame_header(b, 1 << 20);
    EXPECT_FALSE(d.is_ok()) << "flipped byte " << byte;
    EXPECT_EQ(d.status().code(), StatusCode::kBadFrame);
  }
}

TEST(FrameTest, FuzzGarbageNeverDecodesOrCrashes) {
  std::mt19937_64 rng(12345);
  transport::FrameHeaderBytes b{};
  for (int iter = 0; iter < 200000; ++iter) {
    for (auto& x : b) x = static_cast<std::byte>(rng());
    Result<transport::FrameHeader> d = transport::decode_frame_header(b, 1 << 20);
    // A random 40 bytes carries the magic with probability 2^-32: treat a hit as a bug in
    // the generator rather than weakening the assertion.
    ASSERT_FALSE(d.is_ok());
  }
}

TEST(FrameTest, FuzzMutatedHeadersRespectBounds) {
  std::mt19937_64 rng(777);
  const transport::FrameHeaderBytes good = transport::encode_frame_header(sample_header());
  for (int iter = 0; iter < 100000; ++iter) {
    transport::FrameHeaderBytes b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<std::byte>(rng());
    const std::uint64_t max = rng() % (1ull << 24);
    Result<transport::FrameHeader> d = transport::decode_frame_header(b, max);
    if (d.is_ok()) {
      EXPECT_LE(d->length, max);
      EXPECT_EQ(transport::encode_frame_header(*d), b);  // nothing accepted that we would not write
    }
  }
}

TEST(FrameTest, AbortFrameRoundTrips) {
  const transport::AbortNotice n{StatusCode::kMismatch, 3, "rank 2 sent 8 bytes"};
  const std::vector<std::byte> frame = transport::encode_abort_frame(5, n);
  ASSERT_GE(frame.size(), transport::kFrameHeaderBytes);
  Result<transport::FrameHeader> h = transport::decode_frame_header(
      std::span<const std::byte, transport::kFrameHeaderBytes>(frame.data(), transport::kFrameHeaderBytes), 1 << 20);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->kind, transport::FrameKind::kAbort);
  EXPECT_EQ(h->epoch, 5u);
  ASSERT_EQ(transport::frame_body_bytes(h->length), frame.size() - transport::kFrameHeaderBytes);
  Result<transport::AbortNotice> d =
      transport::decode_abort_payload(std::span<const std::byte>(frame).subspan(transport::kFrameHeaderBytes, h->length));
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->code, StatusCode::kMismatch);
  EXPECT_EQ(d->origin, 3u);
  EXPECT_EQ(d->message, "rank 2 sent 8 bytes");
}

TEST(FrameTest, AbortMessagesAreCutAndLengthsBounded) {
  const transport::AbortNotice n{StatusCode::kTimedOut, 0, std::string(5000, 'x')};
  const std::vector<std::byte> frame = transport::encode_abort_frame(1, n);
  EXPECT_EQ(frame.size(), transport::kFrameHeaderBytes + transport::kMaxAbortPayloadBytes + transport::kFrameTrailerBytes);
  Result<transport::AbortNotice> d = transport::decode_abort_payload(
      std::span<const std::byte>(frame).subspan(transport::kFrameHeaderBytes, transport::kMaxAbortPayloadBytes));
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->message.size(), transport::kMaxAbortMessageBytes);
  // A header announcing a longer (or too short) abort payload is refused up front.
  transport::FrameHeader h;
  h.kind = transport::FrameKind::kAbort;
  for (std::uint64_t len : {std::uint64_t{0}, std::uint64_t{transport::kAbortFixedBytes - 1},
                            std::uint64_t{transport::kMaxAbortPayloadBytes + 1}, std::uint64_t{1} << 40}) {
    h.length = len;
    EXPECT_FALSE(transport::decode_frame_header(transport::encode_frame_header(h), ~0ull).is_ok()) << len;
  }
  // Unknown kinds are refused.
  transport::FrameHeaderBytes b = transport::encode_frame_header(h);
  b[5] = std::byte{2};
  reseal(b);
  Result<transport::FrameHeader> d2 = transport::decode_frame_header(b, ~0ull);
  ASSERT_FALSE(d2.is_ok());
  EXPECT_NE(d2.status().message().find("unknown frame kind"), std::string::npos);
  // The payload's CRC is its trailer.
  const std::vector<std::byte> frame2 =
      transport::encode_abort_frame(5, transport::AbortNotice{StatusCode::kPeerLost, 1, "gone"});
  Result<transport::FrameHeader> h2 = transport::decode_frame_header(
      std::span<const std::byte, transport::kFrameHeaderBytes>(frame2.data(), transport::kFrameHeaderBytes), ~0ull);
  ASSERT_TRUE(h2.is_ok());
  ASSERT_EQ(frame2.size(), transport::kFrameHeaderBytes + h2->length + transport::kFrameTrailerBytes);
  EXPECT_EQ(transport::decode_frame_trailer(std::span<const std::byte, transport::kFrameTrailerBytes>(
                frame2.data() + transport::kFrameHeaderBytes + h2->length, transport::kFrameTrailerBytes)),
            crc32c(std::span<const std::byte>(frame2).subspan(transport::kFrameHeaderBytes, h2->length)));
}

TEST(FrameTest, AbortPayloadRejectsBadCodesAndLengths) {
  const std::vector<std::byte> frame =
      transport::encode_abort_frame(1, transport::AbortNotice{StatusCode::kMismatch, 1, "why"});
  const std::vector<std::byte> good(frame.begin() + transport::kFrameHeaderBytes,
                                    frame.end() - transport::kFrameTrailerBytes);
  for (std::uint8_t code : {std::uint8_t{0}, std::uint8_t{200}}) {
    std::vector<std::byte> b = good;
    b[0] = static_cast<std::byte>(code);
    EXPECT_FALSE(transport::decode_abort_payload(b).is_ok()) << int{code};
  }
  std::vector<std::byte> b = good;
  b[1] = std::byte{1};  // reserved
  EXPECT_FALSE(transport::decode_abort_payload(b).is_ok());
  b = good;
  b[8] = std::byte{4};  // message length disagrees with the payload
  EXPECT_FALSE(transport::decode_abort_payload(b).is_ok());
  b = good;
  b.pop_back();
  EXPECT_FALSE(transport::decode_abort_payload(b).is_ok());
  EXPECT_FALSE(
      transport::decode_abort_payload(std::span<const std::byte>(good).first(transport::kAbortFixedBytes - 1)).is_ok());
}

TEST(FrameTest, FuzzAbortPayloadsNeverCrash) {
  std::mt19937_64 rng(99);
  const std::vector<std::byte> frame =
      transport::encode_abort_frame(1, transport::AbortNotice{StatusCode::kPeerLost, 2, "connection reset"});
  const std::vector<std::byte> good(frame.begin() + transport::kFrameHeaderBytes,
                                    frame.end() - transport::kFrameTrailerBytes);
  for (int iter = 0; iter < 100000; ++iter) {
    std::vector<std::byte> b = good;
    if (rng() % 4 == 0) b.resize(rng() % (transport::kMaxAbortPayloadBytes + 64));
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips && !b.empty(); ++f)
      b[rng() % b.size()] = static_cast<std::byte>(rng());
    Result<transport::AbortNotice> d = transport::decode_abort_payload(b);
    if (d.is_ok()) {
      EXPECT_NE(d->code, StatusCode::kOk);
      EXPECT_LE(d->message.size(), transport::kMaxAbortMessageBytes);
      EXPECT_EQ(d->message.size() + transport::kAbortFixedBytes, b.size());
    }
  }
}

transport::HandshakeMessage sample_hello() {
  transport::HandshakeMessage m;
  m.type = transport::HandshakeType::kHello;
  m.epoch = 42;
  m.from_rank = 1;
  m.to_rank = 3;
  m.group_size = 4;
  m.nonce = random_nonce();
  return m;
}

TEST(HandshakeCodecTest, EveryMessageTypeRoundTrips) {
  transport::HandshakeMessage hello = sample_hello();
  transport::HandshakeMessage challenge;
  challenge.type = transport::HandshakeType::kChallenge;
  challenge.nonce = random_nonce();
  transport::HandshakeMessage response;
  response.type = transport::HandshakeType::kResponse;
  response.mac = transport::handshake_mac("s", transport::HandshakeRole::kConnector, hello, challenge.nonce);
  transport::HandshakeMessage reject;
  reject.type = transport::HandshakeType::kReject;
  reject.reason = transport::RejectReason::kStaleEpoch;
  reject.epoch = 99;
  for (const transport::HandshakeMessage& m : {hello, challenge, response, reject}) {
    Result<transport::HandshakeMessage> d = transport::decode_handshake(transport::encode_handshake(m));
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    EXPECT_EQ(transport::encode_handshake(*d), transport::encode_handshake(m));
  }
}

TEST(HandshakeCodecTest, RejectsImpossibleRanksAndVersions) {
  transport::HandshakeMessage m = sample_hello();
  m.from_rank = 4;  // == group size
  EXPECT_FALSE(transport::decode_handshake(transport::encode_handshake(m)).is_ok());
  m = sample_hello();
  m.to_rank = m.from_rank;
  EXPECT_FALSE(transport::decode_handshake(transport::encode_handshake(m)).is_ok());
  m = sample_hello();
  m.version = transport::kWireVersion + 1;
  Result<transport::HandshakeMessage> d = transport::decode_handshake(transport::encode_handshake(m));
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("version"), std::string::npos);
}

TEST(HandshakeCodecTest, MacsBindRoleAndTranscript) {
  const transport::HandshakeMessage hello = sample_hello();
  const Nonce na = random_nonce();
  const Mac c = transport::handshake_mac("secret", transport::HandshakeRole::kConnector, hello, na);
  EXPECT_FALSE(macs_equal(c, transport::handshake_mac("secret", transport::HandshakeRole::kAcceptor, hello, na)));
  EXPECT_FALSE(macs_equal(c, transport::handshake_mac("Secret", transport::HandshakeRole::kConnector, hello, na)));
  transport::HandshakeMessage other = hello;
  other.epoch += 1;
  EXPECT_FALSE(macs_equal(c, transport::handshake_mac("secret", transport::HandshakeRole::kConnector, other, na)));
  EXPECT_TRUE(macs_equal(c, transport::handshake_mac("secret", transport::HandshakeRole::kConnector, hello, na)));
}

TEST(HandshakeCodecTest, FuzzGarbageAndMutationsNeverCrash) {
  std::mt19937_64 rng(99);
  transport::HandshakeBytes b{};
  for (int iter = 0; iter < 100000; ++iter) {
    for (auto& x : b) x = static_cast<std::byte>(rng());
    ASSERT_FALSE(transport::decode_handshake(b).is_ok());
  }
  const transport::HandshakeBytes good = transport::encode_handshake(sample_hello());
  for (int iter = 0; iter < 100000; ++iter) {
    b = good;
    b[rng() % b.size()] = static_cast<std::byte>(rng());
    Result<transport::HandshakeMessage> d = transport::decode_handshake(b);
    if (d.is_ok()) {
      EXPECT_EQ(transport::encode_handshake(*d), b);
    }
  }
}

}  // namespace
}  // namespace tributary::agent
