// TLS on data-plane TCP links: the configuration, as parsed once at the edge (the CLI's
// --tls, --tls-cert, --tls-key, --tls-ca) and handed to every TcpEndpoint. No OpenSSL
// here (transport/tcp/tls_stream.h holds it), so this header stays cheap to include.
//
// Which pairs are encrypted is decided by both ends alone from the view (the two members'
// zone labels) and their own mode, never negotiated: kCrossZone encrypts the pairs whose
// zones differ, kAll every TCP pair. The handshake's hello says what the dialer decided so
// that a mode mismatch is refused at once with a clear error (frame.h, kTlsMismatch)
// instead of one side misreading TLS records as frames; an attacker who flips that bit
// only gets the pair refused, because each side encrypts by its own decision.
//
// Keys: with no certificate files, TLS 1.3 with an external pre-shared key derived per
// connection from the cluster secret and the handshake's transcript (frame.h,
// handshake_tls_psk), with (EC)DHE on top for forward secrecy. With --tls-cert/--tls-key/
// --tls-ca, TLS 1.3 with mutual certificate verification against that CA (any certificate
// the CA signed is a member's; names and addresses are not checked). docs/security.md says
// why either is safe and what stays uncovered.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tributary::transport {

enum class TlsMode : std::uint8_t {
  kOff,        // plaintext frames (CRC-32C only), as before
  kCrossZone,  // TLS on TCP pairs whose members' zone labels differ
  kAll,        // TLS on every TCP pair
};

struct TlsConfig {
  TlsMode mode = TlsMode::kOff;
  // All three or none; none: the pre-shared key derived from the cluster secret.
  std::string cert_file;  // PEM: this member's certificate (chain)
  std::string key_file;   // PEM: its private key
  std::string ca_file;    // PEM: the CA every peer's certificate must chain to
  bool uses_certificates() const { return !cert_file.empty(); }
};

// "off", "cross-zone", "all"; kInvalidArgument naming the flag otherwise.
Result<TlsMode> parse_tls_mode(std::string_view text);
std::string_view tls_mode_name(TlsMode mode);
// Whether the pair of members with these zone labels runs TLS under `mode`.
bool tls_between(TlsMode mode, std::string_view zone_a, std::string_view zone_b);
// The files all given or none, and none without a mode that encrypts something.
Status validate_tls_config(const TlsConfig& config);

}  // namespace tributary::transport
