// Wire formats of the TCP data plane: the fixed data-frame header and the fixed-size
// handshake messages. Pure functions over bytes, no sockets, so they can be fuzzed.
//
// Guarantees: every integer is little-endian on the wire whatever the host; a decoder
// never reads outside the span it is given, never allocates from a length it has not
// bounded, and answers either a fully validated value or kBadFrame with the reason.
// Encoders never fail.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/auth.h"
#include "core/status.h"

namespace tributary::agent {

inline constexpr std::uint8_t kWireVersion = 1;

// ---- Data frames: a 40-byte header followed by `length` payload bytes. ----

inline constexpr std::uint32_t kFrameMagic = 0x46425254;  // "TRBF"
inline constexpr std::size_t kFrameHeaderBytes = 40;

struct FrameHeader {
  std::uint64_t epoch = 0;
  std::uint64_t seq = 0;
  std::uint32_t slot = 0;
  std::uint32_t check = 0;
  std::uint64_t length = 0;  // payload bytes after the header
};

using FrameHeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

FrameHeaderBytes encode_frame_header(const FrameHeader& header);
// Rejects a wrong magic or version, nonzero reserved bits, or length > max_payload.
Result<FrameHeader> decode_frame_header(std::span<const std::byte, kFrameHeaderBytes> bytes,
                                        std::uint64_t max_payload);

// ---- Handshake: every message is exactly 64 bytes, so reads never over-consume into
// the data frames that follow on the same stream. ----
//
//   connector                               acceptor
//     HELLO {epoch, from, to, size, nc}  ->
//                                        <-  CHALLENGE {na}          (or REJECT)
//     RESPONSE {HMAC(secret, C|T)}       ->
//                                        <-  ACCEPT {HMAC(secret, A|T)} (or REJECT)
//
// T binds both nonces, the epoch, both ranks and the group size, and the role labels
// C/A differ, so no MAC can be replayed into another connection or reflected back.
// The acceptor checks the connector first, so an unauthenticated peer learns nothing.

inline constexpr std::uint32_t kHandshakeMagic = 0x48425254;  // "TRBH"
inline constexpr std::size_t kHandshakeBytes = 64;

enum class HandshakeType : std::uint8_t {
  kHello = 1,
  kChallenge = 2,
  kResponse = 3,
  kAccept = 4,
  kReject = 5,
};

enum class RejectReason : std::uint8_t {
  kBadMessage = 1,     // not a handshake we understand
  kVersion = 2,        // protocol versions differ
  kStaleEpoch = 3,     // the epoch is older than one this endpoint already moved to
  kAuth = 4,           // the connector failed the cluster-secret challenge
  kGroupMismatch = 5,  // ranks or group size disagree with the acceptor's view
  kBusy = 6,           // too many parked connections
};

struct HandshakeMessage {
  HandshakeType type = HandshakeType::kHello;
  std::uint8_t version = kWireVersion;
  // kHello
  std::uint64_t epoch = 0;  // also kReject: the acceptor's current epoch
  std::uint32_t from_rank = 0;
  std::uint32_t to_rank = 0;
  std::uint32_t group_size = 0;
  Nonce nonce{};  // kHello, kChallenge
  Mac mac{};      // kResponse, kAccept
  RejectReason reason = RejectReason::kBadMessage;  // kReject
};

using HandshakeBytes = std::array<std::byte, kHandshakeBytes>;

HandshakeBytes encode_handshake(const HandshakeMessage& message);
// Checks magic, type, reserved bytes and (except for kReject, so a peer can tell us it
// speaks another version) the version.
Result<HandshakeMessage> decode_handshake(std::span<const std::byte, kHandshakeBytes> bytes);

enum class HandshakeRole : std::uint8_t { kConnector, kAcceptor };
// The MAC one side sends to prove the secret, over the transcript described above.
Mac handshake_mac(std::string_view secret, HandshakeRole role, const HandshakeMessage& hello,
                  const Nonce& acceptor_nonce);

}  // namespace tributary::agent
