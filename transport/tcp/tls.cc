#include "transport/tcp/tls.h"

namespace tributary::transport {

Result<TlsMode> parse_tls_mode(std::string_view text) {
  if (text == "off") return TlsMode::kOff;
  if (text == "cross-zone") return TlsMode::kCrossZone;
  if (text == "all") return TlsMode::kAll;
  return error(StatusCode::kInvalidArgument,
               "--tls '" + std::string(text) + "': want off, cross-zone or all");
}

std::string_view tls_mode_name(TlsMode mode) {
  switch (mode) {
    case TlsMode::kOff: return "off";
    case TlsMode::kCrossZone: return "cross-zone";
    case TlsMode::kAll: return "all";
  }
  return "?";
}

bool tls_between(TlsMode mode, std::string_view zone_a, std::string_view zone_b) {
  return mode == TlsMode::kAll || (mode == TlsMode::kCrossZone && zone_a != zone_b);
}

Status validate_tls_config(const TlsConfig& c) {
  const int given = int{!c.cert_file.empty()} + int{!c.key_file.empty()} + int{!c.ca_file.empty()};
  if (given != 0 && given != 3) {
    return error(StatusCode::kInvalidArgument,
                 "--tls-cert, --tls-key and --tls-ca go together (all three, or none for the "
                 "pre-shared key derived from the cluster secret)");
  }
  if (given == 3 && c.mode == TlsMode::kOff) {
    return error(StatusCode::kInvalidArgument,
                 "--tls-cert/--tls-key/--tls-ca need --tls cross-zone or --tls all");
  }
  return Status();
}

}  // namespace tributary::transport
