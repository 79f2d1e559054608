// The attackers of the hostile suite, on raw sockets: what someone on the network could
// run with nothing but the coordinator's and the agents' addresses (a ZMTP peer that
// speaks ZeroMQ's wire protocol by hand, floods of connections, slow HTTP clients), plus
// a process's resident memory, which the suite asserts on (its CPU time:
// core/process_stat.h).
//
// Every read and connect has a bounded wait; nothing sleeps to let an event happen.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/process_stat.h"
#include "tests/support/raw_socket.h"

namespace tributary::hostile {

using testing::RawSocket;

// ZMTP 3.0 with the NULL mechanism, written by hand: a peer that claims what it likes
// (its identity, frame flags) without the cluster secret.
namespace zmtp {

inline std::string greeting() {
  std::string g(64, '\0');
  g[0] = '\xff';
  g[9] = '\x7f';
  g[10] = 3;  // version 3.0
  g[11] = 0;
  g.replace(12, 4, "NULL");
  return g;
}

inline std::string property(std::string_view name, std::string_view value) {
  std::string p(1, static_cast<char>(name.size()));
  p += name;
  for (int shift = 24; shift >= 0; shift -= 8)
    p.push_back(static_cast<char>(value.size() >> shift));
  p += value;
  return p;
}

// The READY command of a DEALER, naming `identity` as its routing id when not empty.
inline std::string ready(std::string_view identity) {
  std::string body = std::string("\x05READY", 6) + property("Socket-Type", "DEALER");
  if (!identity.empty()) body += property("Identity", identity);
  return std::string(1, '\x04') + static_cast<char>(body.size()) + body;
}

// One message frame; `more`: another frame of the same message follows.
inline std::string frame(std::string_view body, bool more) {
  std::string f;
  if (body.size() < 256) {
    f.push_back(static_cast<char>(more ? 0x01 : 0x00));
    f.push_back(static_cast<char>(body.size()));
  } else {
    f.push_back(static_cast<char>(more ? 0x03 : 0x02));
    for (int shift = 56; shift >= 0; shift -= 8)
      f.push_back(static_cast<char>(static_cast<std::uint64_t>(body.size()) >> shift));
  }
  f += body;
  return f;
}

// The NULL handshake as a libzmq DEALER does it: greeting, the server's greeting, READY,
// the server's READY; only then messages (libzmq refuses a message that arrives before
// it has sent its own READY). False when the server refuses (a CURVE server does).
inline bool handshake(RawSocket& s, std::string_view identity) {
  if (!s.send_all(greeting())) return false;
  auto theirs = s.read_exact(64);
  if (!theirs || theirs->compare(12, 4, "NULL") != 0) return false;
  if (!s.send_all(ready(identity))) return false;
  auto head = s.read_exact(2);  // flags (a short command) and size
  if (!head || (*head)[0] != '\x04') return false;
  return s.read_exact(static_cast<unsigned char>((*head)[1])).has_value();
}

}  // namespace zmtp

// The routing id libzmq gives a ROUTER's first anonymous peer when rand() was never
// seeded: 0x00 followed by glibc's first rand() (0x6b8b4567), big-endian.
inline std::string first_unseeded_routing_id() { return std::string("\x00\x6b\x8b\x45\x67", 5); }

// Resident memory of `pid` in KiB (0 when it is gone).
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// Raises this process's soft limit on open files to `want` (or the hard limit).
inline void raise_fd_limit(rlim_t want) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  r.rlim_cur = std::min(want, r.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &r);
}

// A minimal HTTP/1.0 GET of /metrics; empty on failure.
inline std::string scrape(int port, std::chrono::milliseconds timeout) {
  RawSocket s(port, timeout);
  if (!s.connected() || !s.send_all("GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")) return {};
  return s.read_all();
}

}  // namespace tributary::hostile
