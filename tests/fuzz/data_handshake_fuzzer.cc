// The data-plane handshake messages (transport/tcp/frame.h): any 64 bytes decode to a validated
// message or kBadFrame, a message that decodes re-encodes to the same bytes, and a
// response MAC verifies only for the secret and transcript it was made with.
#include <cstring>

#include "transport/tcp/frame.h"
#include "core/check.h"

using namespace tributary;
using namespace tributary::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < transport::kHandshakeBytes) return 0;
  transport::HandshakeBytes raw;
  std::memcpy(raw.data(), data, raw.size());
  auto m = transport::decode_handshake(raw);
  if (!m) return 0;
  TRIB_CHECK(transport::encode_handshake(*m) == raw) << "handshake message does not round-trip";
  if (m->type == transport::HandshakeType::kHello) {
    TRIB_CHECK(m->group_size > 0 && m->from_rank < m->group_size && m->to_rank < m->group_size &&
               m->from_rank != m->to_rank)
        << "hello with impossible ranks accepted";
    // The rest of the input plays the acceptor's nonce and an attacker's MAC.
    Nonce acceptor{};
    Mac claimed{};
    const std::size_t extra = size - transport::kHandshakeBytes;
    std::memcpy(acceptor.data(), data + transport::kHandshakeBytes, std::min(extra, acceptor.size()));
    if (extra > acceptor.size())
      std::memcpy(claimed.data(), data + transport::kHandshakeBytes + acceptor.size(),
                  std::min(extra - acceptor.size(), claimed.size()));
    const Mac right = transport::handshake_mac("secret", transport::HandshakeRole::kConnector, *m, acceptor);
    TRIB_CHECK(!macs_equal(right, transport::handshake_mac("secret", transport::HandshakeRole::kAcceptor, *m, acceptor)))
        << "a connector MAC reflects as an acceptor MAC";
    TRIB_CHECK(macs_equal(right, claimed) == (right == claimed)) << "MAC comparison is wrong";
  }
  return 0;
}
