// The agent's data plane: the TCP listener that lives across epochs, the ordered table
// of transports built from the configuration (transport/transport_table.h), and which
// path carries each peer of the current group, for metrics and logs.
//
// Configuration (WorkerConfig): `transport` is "auto" (shared memory for members on
// this host, TCP otherwise), "shm" (shared memory only: a group with a member on
// another host fails to connect, saying which) or "tcp". `data_addresses` lists the
// addresses peers dial, "host[:port]" in order of preference (port: the listener's);
// empty means the listener's own address (or --advertise-host with its port).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/tcp_endpoint.h"
#include "agent/worker.h"
#include "transport/transport_table.h"

namespace tributary::transport {
class ShmTransport;
}

namespace tributary::agent {

// One peer of the current group: the path that carries it and the bytes it moved.
struct PeerPath {
  int rank = -1;
  std::uint64_t member = 0;
  std::string address;
  std::string transport;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
};

// Data-plane frames refused over the process's lifetime (monotonic).
struct FrameRefusals {
  std::uint64_t bad_frames = 0;    // malformed or corrupted (CRC failures included)
  std::uint64_t crc_failures = 0;  // frames whose CRC-32C did not match
};

class DataPlane {
 public:
  static Result<std::unique_ptr<DataPlane>> start(const WorkerConfig& config, Logger log);
  ~DataPlane();

  // The listener's port and the addresses this member advertises, most preferred first.
  std::uint16_t port() const;
  const std::vector<std::string>& addresses() const { return addresses_; }
  // What the coordinator is told: every transport's adverts, in table order.
  std::vector<std::string> capabilities() const { return table_->advertise(); }

  // Connects `spec`'s group over the transport the table picks; logs the paths.
  Result<std::unique_ptr<algorithms::Link>> connect(const transport::GroupSpec& spec,
                                                    Deadline deadline);
  void cancel_connect(std::uint64_t newer_epoch) { table_->cancel_connect(newer_epoch); }
  // The current group's peers (empty before the first group).
  std::vector<PeerPath> paths() const;
  FrameRefusals refusals() const;

 private:
  DataPlane() = default;

  std::unique_ptr<TcpEndpoint> endpoint_;
  std::unique_ptr<transport::TransportTable> table_;
  // Under "shm" only: TCP outside the table, as shared memory's source of connections.
  std::unique_ptr<transport::Transport> tcp_only_channels_;
  transport::ShmTransport* shm_ = nullptr;  // owned by table_; nullptr when not in it
  std::vector<std::string> addresses_;
  Logger log_{"link"};
  mutable std::mutex mu_;
  std::string group_transport_;
  std::vector<std::uint64_t> group_members_;
};

// "host[:port]" (or "[v6][:port]", or a bare IPv6 address) with `port` filled in when
// missing; kInvalidArgument on anything else.
Result<std::string> complete_address(const std::string& address, std::uint16_t port);

}  // namespace tributary::agent
