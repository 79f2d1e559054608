// "host:port" and "[v6]:port" as members advertise their data addresses.
#pragma once

#include <string>

namespace tributary::transport {

// Splits `address` into its host (brackets of an IPv6 literal removed) and port; false when
// it has no port, an empty host, or an unclosed bracket.
inline bool split_host_port(const std::string& address, std::string* host, std::string* port) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->front() == '[') {
    if (host->size() < 3 || host->back() != ']') return false;
    *host = host->substr(1, host->size() - 2);
  }
  return true;
}

}  // namespace tributary::transport
