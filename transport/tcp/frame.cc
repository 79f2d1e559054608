#include "transport/tcp/frame.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "core/little_endian.h"

namespace tributary::transport {
namespace {

bool all_zero(const std::byte* begin, const std::byte* end) {
  return std::all_of(begin, end, [](std::byte b) { return b == std::byte{0}; });
}

Status bad(std::string what) { return error(StatusCode::kBadFrame, std::move(what)); }

// The header's own CRC covers everything before it.
constexpr std::size_t kHeaderCrcOffset = kFrameHeaderBytes - 4;

std::uint32_t header_crc(const std::byte* b) { return crc32c({b, kHeaderCrcOffset}); }

}  // namespace

FrameHeaderBytes encode_frame_header(const FrameHeader& h) {
  FrameHeaderBytes b{};
  le::store<std::uint32_t>(&b[0], kFrameMagic);
  b[4] = static_cast<std::byte>(kWireVersion);
  b[5] = static_cast<std::byte>(h.kind);
  le::store<std::uint64_t>(&b[8], h.epoch);
  le::store<std::uint64_t>(&b[16], h.seq);
  le::store<std::uint32_t>(&b[24], h.slot);
  le::store<std::uint32_t>(&b[28], h.check);
  le::store<std::uint64_t>(&b[32], h.length);
  le::store<std::uint64_t>(&b[40], h.stamp);
  le::store<std::uint32_t>(&b[kHeaderCrcOffset], header_crc(b.data()));
  return b;
}

Result<FrameHeader> decode_frame_header(std::span<const std::byte, kFrameHeaderBytes> b,
                                        std::uint64_t max_payload) {
  const auto magic = le::load<std::uint32_t>(&b[0]);
  if (magic != kFrameMagic) return bad("bad frame magic " + std::to_string(magic));
  const auto version = static_cast<std::uint8_t>(b[4]);
  if (version != kWireVersion) return bad("unsupported frame version " + std::to_string(version));
  const auto stored_crc = le::load<std::uint32_t>(&b[kHeaderCrcOffset]);
  if (const std::uint32_t crc = header_crc(b.data()); crc != stored_crc) {
    return bad("frame header fails its CRC-32C check (computed " + std::to_string(crc) + ", sent " +
               std::to_string(stored_crc) + "): corrupted in transit");
  }
  const auto kind = static_cast<std::uint8_t>(b[5]);
  if (kind > static_cast<std::uint8_t>(FrameKind::kAbort)) {
    return bad("unknown frame kind " + std::to_string(kind));
  }
  if (!all_zero(&b[6], &b[8]) || !all_zero(&b[48], &b[kHeaderCrcOffset])) {
    return bad("nonzero reserved frame bits");
  }
  FrameHeader h;
  h.kind = static_cast<FrameKind>(kind);
  h.epoch = le::load<std::uint64_t>(&b[8]);
  h.seq = le::load<std::uint64_t>(&b[16]);
  h.slot = le::load<std::uint32_t>(&b[24]);
  h.check = le::load<std::uint32_t>(&b[28]);
  h.length = le::load<std::uint64_t>(&b[32]);
  h.stamp = le::load<std::uint64_t>(&b[40]);
  if (h.length > max_payload) {
    return bad("frame length " + std::to_string(h.length) + " exceeds the limit of " +
               std::to_string(max_payload) + " bytes");
  }
  if (h.kind == FrameKind::kAbort &&
      (h.length < kAbortFixedBytes || h.length > kMaxAbortPayloadBytes)) {
    return bad("abort frame of " + std::to_string(h.length) + " bytes");
  }
  return h;
}

FrameTrailerBytes encode_frame_trailer(std::uint32_t payload_crc) {
  FrameTrailerBytes b{};
  le::store<std::uint32_t>(b.data(), payload_crc);
  return b;
}

std::uint32_t decode_frame_trailer(std::span<const std::byte, kFrameTrailerBytes> b) {
  return le::load<std::uint32_t>(b.data());
}

std::vector<std::byte> encode_abort_frame(std::uint64_t epoch, const AbortNotice& notice) {
  const std::size_t len = std::min(notice.message.size(), kMaxAbortMessageBytes);
  FrameHeader h;
  h.epoch = epoch;
  h.kind = FrameKind::kAbort;
  h.length = kAbortFixedBytes + len;
  std::vector<std::byte> out(kFrameHeaderBytes + frame_body_bytes(h.length), std::byte{0});
  std::byte* p = out.data() + kFrameHeaderBytes;
  p[0] = static_cast<std::byte>(notice.code);
  le::store<std::uint32_t>(p + 4, notice.origin);
  le::store<std::uint32_t>(p + 8, static_cast<std::uint32_t>(len));
  if (len > 0) std::memcpy(p + kAbortFixedBytes, notice.message.data(), len);
  const FrameHeaderBytes hb = encode_frame_header(h);
  std::memcpy(out.data(), hb.data(), hb.size());
  const FrameTrailerBytes tb = encode_frame_trailer(crc32c({p, h.length}));
  std::memcpy(p + h.length, tb.data(), tb.size());
  return out;
}

Result<AbortNotice> decode_abort_payload(std::span<const std::byte> b) {
  if (b.size() < kAbortFixedBytes || b.size() > kMaxAbortPayloadBytes) {
    return bad("abort notice of " + std::to_string(b.size()) + " bytes");
  }
  const auto code = static_cast<std::uint8_t>(b[0]);
  if (code == static_cast<std::uint8_t>(StatusCode::kOk) ||
      code > static_cast<std::uint8_t>(StatusCode::kInternal)) {
    return bad("abort notice with status code " + std::to_string(code));
  }
  if (!all_zero(&b[1], &b[4])) return bad("nonzero reserved abort notice bits");
  const auto len = le::load<std::uint32_t>(&b[8]);
  if (len != b.size() - kAbortFixedBytes) {
    return bad("abort notice message of " + std::to_string(len) + " bytes in a payload of " +
               std::to_string(b.size()));
  }
  AbortNotice n;
  n.code = static_cast<StatusCode>(code);
  n.origin = le::load<std::uint32_t>(&b[4]);
  n.message.assign(reinterpret_cast<const char*>(b.data() + kAbortFixedBytes), len);
  return n;
}

HandshakeBytes encode_handshake(const HandshakeMessage& m) {
  HandshakeBytes b{};
  le::store<std::uint32_t>(&b[0], kHandshakeMagic);
  b[4] = static_cast<std::byte>(m.version);
  b[5] = static_cast<std::byte>(m.type);
  std::byte* body = &b[8];
  switch (m.type) {
    case HandshakeType::kHello:
      le::store<std::uint64_t>(body, m.epoch);
      le::store<std::uint32_t>(body + 8, m.from_rank);
      le::store<std::uint32_t>(body + 12, m.to_rank);
      le::store<std::uint32_t>(body + 16, m.group_size);
      body[20] = static_cast<std::byte>((m.tls ? 1 : 0) | (m.tls_certificates ? 2 : 0));
      std::memcpy(body + 24, m.nonce.data(), m.nonce.size());
      break;
    case HandshakeType::kChallenge: std::memcpy(body, m.nonce.data(), m.nonce.size()); break;
    case HandshakeType::kResponse:
    case HandshakeType::kAccept: std::memcpy(body, m.mac.data(), m.mac.size()); break;
    case HandshakeType::kReject:
      body[0] = static_cast<std::byte>(m.reason);
      le::store<std::uint64_t>(body + 8, m.epoch);
      break;
  }
  return b;
}

Result<HandshakeMessage> decode_handshake(std::span<const std::byte, kHandshakeBytes> b) {
  const auto magic = le::load<std::uint32_t>(&b[0]);
  if (magic != kHandshakeMagic) return bad("not a tributary handshake (bad magic)");
  HandshakeMessage m;
  m.version = static_cast<std::uint8_t>(b[4]);
  const auto type = static_cast<std::uint8_t>(b[5]);
  if (type < 1 || type > 5) return bad("unknown handshake message type " + std::to_string(type));
  m.type = static_cast<HandshakeType>(type);
  if (!all_zero(&b[6], &b[8])) return bad("nonzero reserved handshake bits");
  if (m.version != kWireVersion && m.type != HandshakeType::kReject) {
    return bad("unsupported handshake version " + std::to_string(m.version) + " (we speak " +
               std::to_string(kWireVersion) + ")");
  }
  const std::byte* body = &b[8];
  const std::byte* end = b.data() + b.size();
  const std::byte* used = body;
  switch (m.type) {
    case HandshakeType::kHello:
      m.epoch = le::load<std::uint64_t>(body);
      m.from_rank = le::load<std::uint32_t>(body + 8);
      m.to_rank = le::load<std::uint32_t>(body + 12);
      m.group_size = le::load<std::uint32_t>(body + 16);
      if ((static_cast<std::uint8_t>(body[20]) & ~3u) != 0 || !all_zero(body + 21, body + 24)) {
        return bad("nonzero reserved handshake bits");
      }
      m.tls = (static_cast<std::uint8_t>(body[20]) & 1u) != 0;
      m.tls_certificates = (static_cast<std::uint8_t>(body[20]) & 2u) != 0;
      if (m.tls_certificates && !m.tls) return bad("hello asks for TLS certificates without TLS");
      std::memcpy(m.nonce.data(), body + 24, m.nonce.size());
      used = body + 24 + m.nonce.size();
      // Ranks travel as u32 but are ints everywhere else; the group bound keeps them small.
      if (m.group_size == 0 || m.group_size > (1u << 20) || m.from_rank >= m.group_size ||
          m.to_rank >= m.group_size || m.from_rank == m.to_rank) {
        return bad("hello names impossible ranks " + std::to_string(m.from_rank) + " -> " +
                   std::to_string(m.to_rank) + " in a group of " + std::to_string(m.group_size));
      }
      break;
    case HandshakeType::kChallenge:
      std::memcpy(m.nonce.data(), body, m.nonce.size());
      used = body + m.nonce.size();
      break;
    case HandshakeType::kResponse:
    case HandshakeType::kAccept:
      std::memcpy(m.mac.data(), body, m.mac.size());
      used = body + m.mac.size();
      break;
    case HandshakeType::kReject: {
      const auto reason = static_cast<std::uint8_t>(body[0]);
      if (reason < 1 || reason > 7) return bad("unknown reject reason " + std::to_string(reason));
      m.reason = static_cast<RejectReason>(reason);
      if (!all_zero(body + 1, body + 8)) return bad("nonzero reserved handshake bits");
      m.epoch = le::load<std::uint64_t>(body + 8);
      used = body + 16;
      break;
    }
  }
  if (!all_zero(used, end)) return bad("nonzero padding in handshake message");
  return m;
}

namespace {

Mac transcript_mac(std::string_view secret, std::string_view label, const HandshakeMessage& hello,
                   const Nonce& acceptor_nonce) {
  HandshakeMessage transcript_hello = hello;
  transcript_hello.type = HandshakeType::kHello;
  const HandshakeBytes hb = encode_handshake(transcript_hello);
  std::vector<std::uint8_t> msg;
  msg.reserve(32 + hb.size() + acceptor_nonce.size());
  msg.insert(msg.end(), label.begin(), label.end());
  msg.push_back(0);
  for (std::byte x : hb) msg.push_back(static_cast<std::uint8_t>(x));
  msg.insert(msg.end(), acceptor_nonce.begin(), acceptor_nonce.end());
  return hmac_sha256(secret, msg);
}

}  // namespace

Mac handshake_mac(std::string_view secret, HandshakeRole role, const HandshakeMessage& hello,
                  const Nonce& acceptor_nonce) {
  return transcript_mac(secret,
                        role == HandshakeRole::kConnector ? "tributary-tcp-v1 connector"
                                                          : "tributary-tcp-v1 acceptor",
                        hello, acceptor_nonce);
}

Mac handshake_tls_psk(std::string_view secret, const HandshakeMessage& hello,
                      const Nonce& acceptor_nonce) {
  return transcript_mac(secret, "tributary/tls-psk/v1", hello, acceptor_nonce);
}

}  // namespace tributary::transport
