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
#include <string>
#include <string_view>
#include <vector>

#include "core/auth.h"
#include "core/status.h"

namespace tributary::transport {

// 2: frames carry CRC-32Cs. 3: frames carry a stamp (algorithms/pollable_link.h). 4: the
// payload's CRC-32C follows the payload (a trailer) instead of riding in the header. The
// handshake carries the version, so a peer of another version is refused at the handshake
// instead of misreading frames.
inline constexpr std::uint8_t kWireVersion = 4;

// ---- Data frames: a 56-byte header, `length` payload bytes, and, when length > 0, a
// 4-byte trailer: the CRC-32C of the payload. ----
//
// Integrity (core/crc32c.h): the header ends with the CRC-32C of its first 52 bytes,
// checked before any of its fields is believed (a flipped bit in `length` would otherwise
// desynchronise the stream); the trailer is checked by the receiver once it is in and
// before the message is delivered. A mismatch is a kBadFrame naming the peer, never a
// value handed to the caller. The payload's checksum comes after it so that a sender can
// compute it as the bytes go out, while they are in cache, instead of reading the whole
// buffer once more before its first byte may leave.

inline constexpr std::uint32_t kFrameMagic = 0x46425254;  // "TRBF"
inline constexpr std::size_t kFrameHeaderBytes = 56;
inline constexpr std::size_t kFrameTrailerBytes = 4;
// What follows a header whose length is `length`: the payload and its trailer.
inline constexpr std::uint64_t frame_body_bytes(std::uint64_t length) {
  return length == 0 ? 0 : length + kFrameTrailerBytes;
}

enum class FrameKind : std::uint8_t {
  kData = 0,   // a message for the recv posted with (seq, slot)
  kAbort = 1,  // the sender's link failed; the payload is an AbortNotice (seq/slot/check 0)
};

struct FrameHeader {
  std::uint64_t epoch = 0;
  std::uint64_t seq = 0;
  std::uint32_t slot = 0;
  std::uint32_t check = 0;
  std::uint64_t length = 0;  // payload bytes after the header (the trailer not counted)
  FrameKind kind = FrameKind::kData;
  std::uint64_t stamp = 0;  // the sender's, for the receive (PollableLink::send_stamped)
};

using FrameHeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

using FrameTrailerBytes = std::array<std::byte, kFrameTrailerBytes>;

// Fills in the header's own CRC.
FrameHeaderBytes encode_frame_header(const FrameHeader& header);
// Rejects a wrong magic or version, a header CRC that does not match, an unknown kind,
// nonzero reserved bits, or length > max_payload (an abort frame's length is bounded by
// kMaxAbortPayloadBytes too). The trailer is left to whoever reads the payload.
Result<FrameHeader> decode_frame_header(std::span<const std::byte, kFrameHeaderBytes> bytes,
                                        std::uint64_t max_payload);

// The trailer of a payload whose CRC-32C is `payload_crc`, and back.
FrameTrailerBytes encode_frame_trailer(std::uint32_t payload_crc);
std::uint32_t decode_frame_trailer(std::span<const std::byte, kFrameTrailerBytes> bytes);

// ---- Abort notices: why a rank gave up on its link, sent best effort to every peer just
// before it closes the sockets, so they fail with the same code and reason instead of a
// bare "peer closed". Payload: code u8, 3 zero bytes, origin rank u32, message length
// u32, message bytes. `origin` is the rank whose error it is (a relayed notice keeps it).

inline constexpr std::size_t kMaxAbortMessageBytes = 1024;
inline constexpr std::size_t kAbortFixedBytes = 12;
inline constexpr std::size_t kMaxAbortPayloadBytes = kAbortFixedBytes + kMaxAbortMessageBytes;

struct AbortNotice {
  StatusCode code = StatusCode::kAborted;  // never kOk
  std::uint32_t origin = 0;
  std::string message;  // at most kMaxAbortMessageBytes; longer ones are cut when encoded
};

// Header, payload and trailer of one abort frame, ready to write.
std::vector<std::byte> encode_abort_frame(std::uint64_t epoch, const AbortNotice& notice);
// The payload only (the header has been decoded already). kBadFrame on a wrong length,
// code kOk or unknown, nonzero reserved bytes.
Result<AbortNotice> decode_abort_payload(std::span<const std::byte> payload);

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
//
// The hello also says whether the dialer encrypts this pair (transport/tcp/tls.h) and with which
// kind of key; the acceptor, deciding the same from its own configuration, answers REJECT
// {kTlsMismatch} when they differ. After ACCEPT a pair that encrypts starts TLS 1.3 on
// the same connection (the dialer is the client), before the first frame.

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
  kTlsMismatch = 7,    // one side encrypts the pair (or uses certificates), the other not
};

struct HandshakeMessage {
  HandshakeType type = HandshakeType::kHello;
  std::uint8_t version = kWireVersion;
  // kHello
  std::uint64_t epoch = 0;  // also kReject: the acceptor's current epoch
  std::uint32_t from_rank = 0;
  std::uint32_t to_rank = 0;
  std::uint32_t group_size = 0;
  bool tls = false;               // kHello: the dialer runs TLS on this connection
  bool tls_certificates = false;  // kHello: ... with certificates (else the derived PSK)
  Nonce nonce{};                                    // kHello, kChallenge
  Mac mac{};                                        // kResponse, kAccept
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
// The TLS pre-shared key of one connection: HMAC-SHA256(secret, "tributary/tls-psk/v1" 0
// || hello || na), the same transcript as the MACs under another label, so each
// connection's TLS keys are bound to its authenticated handshake and to nothing else.
Mac handshake_tls_psk(std::string_view secret, const HandshakeMessage& hello,
                      const Nonce& acceptor_nonce);

}  // namespace tributary::transport
