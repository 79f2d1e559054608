// Helpers for the TCP data-plane tests: ranks as threads, each with its own endpoint on
// an ephemeral loopback port, a log sink the test can search, and a raw peer that speaks
// the wire protocol by hand so tests can misbehave on purpose.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/tcp/frame.h"
#include "transport/tcp/tcp_endpoint.h"
#include "core/crc32c.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {

class LogCapture {
 public:
  // A Logger whose lines (the message, after `prefix`) the test can search.
  Logger logger(std::string prefix) {
    return Logger("link", [this, prefix](const LogRecord& record) {
      std::lock_guard lock(mu_);
      lines_.push_back(prefix + std::string(record.message));
    });
  }
  bool contains(const std::string& a, const std::string& b = "") const {
    std::lock_guard lock(mu_);
    for (const auto& l : lines_) {
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
    }
    return false;
  }
  std::string dump() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

inline transport::TcpEndpointConfig test_config(LogCapture& logs, int rank,
                                            std::string secret = "s3cret") {
  transport::TcpEndpointConfig c;
  c.secret = std::move(secret);
  c.log = logs.logger("[rank " + std::to_string(rank) + "] ");
  return c;
}

struct Cluster {
  std::vector<std::unique_ptr<transport::TcpEndpoint>> endpoints;
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<algorithms::Link>> links;
};

inline Cluster make_cluster(int n, LogCapture& logs,
                            Duration busy_poll = transport::TcpEndpointConfig{}.busy_poll) {
  Cluster c;
  for (int r = 0; r < n; ++r) {
    transport::TcpEndpointConfig config = test_config(logs, r);
    config.busy_poll = busy_poll;
    auto ep = transport::TcpEndpoint::listen(config);
    if (!ep.is_ok()) throw std::runtime_error(ep.status().to_string());
    c.addresses.push_back((*ep)->address());
    c.endpoints.push_back(std::move(*ep));
  }
  c.links.resize(static_cast<std::size_t>(n));
  return c;
}

// The socket of this process whose remote end is local port `port` (the dialing side of a
// connection to that listener), or -1: a test shuts it down to fail that one pair.
inline int socket_to_port(std::uint16_t port) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.ss_family == AF_INET &&
        ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port) == port) {
      found = fd;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

inline std::uint16_t port_of(const std::string& address) {
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

// Pair 0-1 of `c` (built at `epoch`) loses its connection (rank 0's side shut down: both
// ends see it close, as a receive on each shows), and both ranks reconnect it
// (TcpEndpoint::reconnect): the new sockets, by rank, for the caller to check and put in.
inline std::vector<transport::PeerSocket> cut_and_reconnect_pair01(Cluster& c, std::uint64_t epoch) {
  const int fd = socket_to_port(port_of(c.addresses[1]));  // rank 0 dialled rank 1
  EXPECT_GE(fd, 0);
  ::shutdown(fd, SHUT_RDWR);
  std::vector<std::byte> buf(10);
  for (int r = 0; r < 2; ++r) {
    const Status st = c.links[r]->wait(c.links[r]->recv(1 - r, algorithms::Tag{77, 0, 0}, buf),
                                       Deadline::after(std::chrono::seconds(10)));
    EXPECT_EQ(st.code(), StatusCode::kPeerLost) << "rank " << r << ": " << st.to_string();
  }
  std::vector<std::vector<std::string>> addresses;
  for (const std::string& a : c.addresses) addresses.push_back({a});
  std::vector<transport::PeerSocket> out(2);
  const auto statuses = run_ranks(2, [&](int r) -> Status {
    TRIB_ASSIGN_OR_RETURN(auto got, c.endpoints[r]->reconnect(epoch, r, addresses, {1 - r},
                                                              Deadline::after(std::chrono::seconds(10))));
    if (got.size() != 1 || got[0].rank != 1 - r) {
      return error(StatusCode::kInternal, "rank " + std::to_string(r) + " reconnected " +
                                              std::to_string(got.size()) + " sockets");
    }
    out[r] = std::move(got[0]);
    return Status();
  });
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

// Every rank calls connect_group concurrently; returns each rank's status.
inline std::vector<Status> connect_all(Cluster& c, std::uint64_t epoch,
                                       Duration timeout = std::chrono::seconds(10)) {
  const Deadline deadline = Deadline::after(timeout);
  return run_ranks(static_cast<int>(c.endpoints.size()), [&](int r) {
    auto link = c.endpoints[r]->connect_group(epoch, r, c.addresses, deadline);
    if (!link.is_ok()) return link.status();
    c.links[r] = std::move(*link);
    return Status();
  });
}

// Speaks the protocol by hand, as rank `from` dialing an endpoint.
class RawPeer {
 public:
  RawPeer() : sock_(io_) {}

  std::error_code connect(std::uint16_t port) {
    std::error_code ec;
    sock_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) sock_.set_option(asio::ip::tcp::no_delay(true), ec);
    return ec;
  }

  // Full connector handshake; returns the acceptor's final message (kAccept or kReject).
  Result<transport::HandshakeMessage> handshake(const std::string& secret, std::uint64_t epoch,
                                            int from, int to, int size) {
    using namespace transport;
    transport::HandshakeMessage hello;
    hello.type = transport::HandshakeType::kHello;
    hello.epoch = epoch;
    hello.from_rank = static_cast<std::uint32_t>(from);
    hello.to_rank = static_cast<std::uint32_t>(to);
    hello.group_size = static_cast<std::uint32_t>(size);
    hello.nonce = random_nonce();
    write(transport::encode_handshake(hello));
    auto reply = read_message();
    if (!reply.is_ok() || reply->type != transport::HandshakeType::kChallenge) return reply;
    transport::HandshakeMessage response;
    response.type = transport::HandshakeType::kResponse;
    response.mac = transport::handshake_mac(secret, transport::HandshakeRole::kConnector, hello, reply->nonce);
    write(transport::encode_handshake(response));
    return read_message();
  }

  Result<transport::HandshakeMessage> read_message() {
    transport::HandshakeBytes b{};
    std::error_code ec;
    asio::read(sock_, asio::buffer(b), ec);
    if (ec) return error(StatusCode::kPeerLost, ec.message());
    return transport::decode_handshake(b);
  }

  template <typename Bytes>
  void write(const Bytes& bytes) {
    std::error_code ec;
    asio::write(sock_, asio::buffer(bytes.data(), bytes.size()), ec);
  }

  // With the payload's CRC-32C trailer; `corrupt_at`: then flips a bit of that payload
  // byte on the way out, as a faulty network would.
  void write_frame(const transport::FrameHeader& h, std::string payload,
                   std::optional<std::size_t> corrupt_at = std::nullopt) {
    const transport::FrameTrailerBytes trailer =
        transport::encode_frame_trailer(crc32c(std::as_bytes(std::span(payload.data(), payload.size()))));
    if (corrupt_at) payload[*corrupt_at] = static_cast<char>(payload[*corrupt_at] ^ 0x10);
    write(transport::encode_frame_header(h));
    write(payload);
    if (!payload.empty()) write(trailer);
  }

  // Reads one data frame the link sent: its header, payload and trailer, the trailer
  // checked against the payload (kBadFrame when it differs).
  struct ReadFrame {
    transport::FrameHeader header;
    std::string payload;
  };
  Result<ReadFrame> read_frame(std::uint64_t max_payload = 1ull << 30) {
    transport::FrameHeaderBytes hb{};
    std::error_code ec;
    asio::read(sock_, asio::buffer(hb), ec);
    if (ec) return error(StatusCode::kPeerLost, ec.message());
    TRIB_ASSIGN_OR_RETURN(transport::FrameHeader h, transport::decode_frame_header(hb, max_payload));
    ReadFrame f{h, std::string(h.length, '\0')};
    asio::read(sock_, asio::buffer(f.payload.data(), f.payload.size()), ec);
    if (ec) return error(StatusCode::kPeerLost, ec.message());
    if (h.length == 0) return f;
    transport::FrameTrailerBytes tb{};
    asio::read(sock_, asio::buffer(tb), ec);
    if (ec) return error(StatusCode::kPeerLost, ec.message());
    const std::uint32_t crc = crc32c(std::as_bytes(std::span(f.payload.data(), f.payload.size())));
    if (transport::decode_frame_trailer(tb) != crc) {
      return error(StatusCode::kBadFrame, "trailer " + std::to_string(transport::decode_frame_trailer(tb)) +
                                              ", payload's CRC-32C " + std::to_string(crc));
    }
    return f;
  }

  // Blocks until the other side closes (true) or sends something (false).
  bool closed_by_peer() {
    char c;
    std::error_code ec;
    sock_.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  int native_handle() { return sock_.native_handle(); }

  std::string local_address() {
    std::error_code ec;
    return "127.0.0.1:" + std::to_string(sock_.local_endpoint(ec).port());
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket sock_;
};

inline Deadline soon() { return Deadline::after(std::chrono::seconds(20)); }

inline void expect_all_ok(const std::vector<Status>& st) {
  for (std::size_t r = 0; r < st.size(); ++r)
    EXPECT_TRUE(st[r].is_ok()) << "rank " << r << ": " << st[r].to_string();
}

// Rank 0 of a group is a RawPeer; ranks 1.. are real endpoints. Returns the real links.
struct RawGroup {
  LogCapture logs;
  Cluster c;
  std::vector<std::unique_ptr<RawPeer>> raw;  // raw[r]: rank 0's connection to rank r
};

inline void build_raw_group(
    RawGroup& g, int n, std::uint64_t epoch,
    std::uint64_t max_unexpected_bytes = transport::TcpEndpointConfig{}.max_unexpected_bytes) {
  for (int r = 1; r < n; ++r) {
    transport::TcpEndpointConfig config = test_config(g.logs, r);
    config.max_unexpected_bytes = max_unexpected_bytes;
    auto ep = transport::TcpEndpoint::listen(config);
    ASSERT_TRUE(ep.is_ok());
    g.c.endpoints.push_back(std::move(*ep));
  }
  g.c.addresses.push_back("127.0.0.1:1");  // rank 0 is never dialed: it dials everyone
  for (auto& ep : g.c.endpoints) g.c.addresses.push_back(ep->address());
  g.c.links.resize(static_cast<std::size_t>(n));
  g.raw.resize(static_cast<std::size_t>(n));
  std::vector<Status> st = run_ranks(n, [&](int r) {
    if (r == 0) {
      for (int p = 1; p < n; ++p) {
        g.raw[p] = std::make_unique<RawPeer>();
        if (g.raw[p]->connect(g.c.endpoints[p - 1]->port()))
          return error(StatusCode::kUnavailable, "dial");
        auto m = g.raw[p]->handshake("s3cret", epoch, 0, p, n);
        if (!m.is_ok() || m->type != transport::HandshakeType::kAccept)
          return error(StatusCode::kAuthFailed, "raw");
      }
      return Status();
    }
    auto link = g.c.endpoints[r - 1]->connect_group(epoch, r, g.c.addresses, soon());
    if (!link.is_ok()) return link.status();
    g.c.links[r] = std::move(*link);
    return Status();
  });
  expect_all_ok(st);
}

inline std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}
inline std::span<std::byte> bytes_of(std::string& s) {
  return std::as_writable_bytes(std::span(s.data(), s.size()));
}

}  // namespace tributary::testing
