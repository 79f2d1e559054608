// The agent's data plane: the TCP listener that lives across epochs, the ordered table
// of transports built from the configuration (transport/transport_table.h), and which
// path carries each peer of the current group, for metrics and logs.
//
// Configuration (DataPlaneConfig, copied from the WorkerConfig fields of the same names):
// `transport` is "auto" (shared memory for members on
// this host, RDMA verbs for members that all have a device, TCP otherwise), "shm" (shared
// memory only: a group with a member on another host fails to connect, saying which),
// "rdma" (RDMA only, likewise; refused by a build without libibverbs) or "tcp".
// `tls` (transport/tcp/tls.h) encrypts TCP pairs, the standby paths' too; shared memory never
// leaves the host and stays as it is; RDMA is not encrypted, so with TLS on "auto" leaves
// it out of the table and "rdma" is refused.
// `data_addresses` lists the addresses peers dial, "host[:port]" in order of preference
// (port: the listener's); empty means the listener's own address (or --advertise-host
// with its port).
//
// With `failover` (--failover), more listeners carry standby TCP paths per pair, each with
// its own connections: one per data address but the first, dialing the peer's standby on
// that address (the first standby falls back on the other addresses when its own does
// not connect); with one address, one standby over it. So with networks A and B the
// standby runs over B, and with A, B and C a pair has [the table's path, B, C]. Every
// group whose members all advertise standby k ("tcp-standby:<address>",
// "tcp-standby-2:<address>", ...) gets it as path k + 1 of a transport/failover_link.h
// link: a pair whose path fails, or stays without acknowledgement for `stall_timeout`,
// moves to its next path and resumes at the first message its peer had not received,
// with no view change, and moves back up when a stalled path answers again; a TCP path
// whose connection failed with an error is re-dialled in the background
// (agent/path_redialer.h) and the pair moves back up to it once it answers. A group with
// a member that advertises no standby runs on the table's transport alone (logged); a
// standby that does not connect within half a stall timeout of the table's stays in the list as
// a link without connections, whose pairs are re-dialled in the background like failed
// ones: the view alone decides the protocol, so the two ends of a pair always agree. Caveat: acknowledgements are the peer link's, so a peer that
// stays out of the collective longer than `stall_timeout` (a slow step) also moves the
// pair; keep `stall_timeout` above the longest step.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/path_redialer.h"
#include "transport/tcp/tcp_endpoint.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tls.h"
#include "transport/receive_paths.h"
#include "transport/transport_table.h"

namespace tributary::transport {
class RdmaTransport;
class ShmTransport;
struct PathChange;
}

namespace tributary::agent {

struct WorkerConfig;

// --transport: which transports the table holds (the comment at the top says what each does).
enum class TransportChoice : std::uint8_t { kAuto, kTcp, kShm, kRdma };
// "auto", "tcp", "shm", "rdma"; anything else is kInvalidArgument naming the flag.
Result<TransportChoice> parse_transport_choice(std::string_view text);
std::string_view to_string(TransportChoice choice);

// What the data plane takes of the worker's configuration: the WorkerConfig fields of the
// same names (agent/worker.h says what each means), copied by of().
struct DataPlaneConfig {
  std::string secret;
  std::string bind_host;
  std::uint16_t data_port = 0;
  std::string advertise_host;
  std::vector<std::string> data_addresses;
  TransportChoice transport = TransportChoice::kAuto;
  std::uint64_t shm_ring_bytes = 0;
  transport::PathChoice fused_receive = transport::PathChoice::kAuto;
  transport::PathChoice shm_single_copy = transport::PathChoice::kAuto;
  transport::PathChoice failover = transport::PathChoice::kAuto;
  std::chrono::milliseconds stall_timeout{0};
  std::chrono::milliseconds connect_attempt_timeout{0};
  transport::TlsConfig tls;

  // kInvalidArgument for a `transport` that names no choice.
  static Result<DataPlaneConfig> of(const WorkerConfig& config);
};

// One peer of the current group: the path that carries it and the bytes it moved.
struct PeerPath {
  int rank = -1;
  std::uint64_t member = 0;
  std::string address;
  std::string transport;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  bool in_use = true;  // the path that carries the pair now (one of two with failover)
};

// One peer of the current group as `tributary status` shows it (source "agent").
struct PairReport {
  int rank = -1;
  std::uint64_t member = 0;
  std::string transport;  // the path the pair is on ("none": every path failed)
  std::string address;    // that path's address of the peer
  std::vector<std::string> paths;  // the pair's paths, most preferred first
  std::uint32_t moves = 0;         // in this group
  std::string last_move;           // "tcp -> tcp-standby (error)"; "" for none
};

// Moves of pairs between paths over the process's lifetime (monotonic), by peer and kind.
struct PathChangeCount {
  std::string peer;   // the peer's data address (HOST:PORT) in the view
  std::string from;   // path names: "shm", "tcp", "tcp-standby"
  std::string to;     // "none": every path to the peer failed
  // "error", "stall" or "peer" (the peer moved first); "recovered": back up to a path
  // that had stalled and answers again
  std::string cause;
  std::uint64_t count = 0;
};

// Data-plane frames refused over the process's lifetime (monotonic).
struct FrameRefusals {
  std::uint64_t bad_frames = 0;    // malformed or corrupted (CRC failures included)
  std::uint64_t crc_failures = 0;  // frames whose CRC-32C did not match
  std::uint64_t tls_failures = 0;  // TLS handshakes that failed (--tls)
};

class DataPlane {
 public:
  static Result<std::unique_ptr<DataPlane>> start(const DataPlaneConfig& config, Logger log);
  ~DataPlane();

  // The listener's port and the addresses this member advertises, most preferred first.
  std::uint16_t port() const;
  const std::vector<std::string>& addresses() const { return addresses_; }
  // What the coordinator is told: every transport's adverts, in table order.
  std::vector<std::string> capabilities() const;

  // Connects `spec`'s group over the transport the table picks; logs the paths.
  Result<std::unique_ptr<algorithms::Link>> connect(const transport::GroupSpec& spec,
                                                    Deadline deadline);
  void cancel_connect(std::uint64_t newer_epoch);
  // The current group's peers, one entry per path (empty before the first group).
  std::vector<PeerPath> paths() const;
  // The table's transport that carries the current group ("shm", "rdma", "tcp"; "" before
  // the first group): the same on every member, as the group's spec decides it.
  std::string group_transport() const;
  // The current group runs over shared memory (the cost model's constants follow).
  bool group_on_shared_memory() const;
  // The current group's peers, one entry per peer (empty before the first group).
  std::vector<PairReport> pair_report() const;
  FrameRefusals refusals() const;
  std::vector<PathChangeCount> path_changes() const;
  // New connections made for failed paths so far (PathRedialer::reconnects()).
  std::uint64_t reconnects() const { return redialer_->reconnects(); }
  // How many path changes so far (cheap: for deciding when to sync the metrics).
  std::uint64_t path_change_total() const { return path_change_total_.load(); }

 private:
  DataPlane() = default;
  // The paths a group connects before its standbys: the table's transport alone, or in a
  // group that mixes transports shared memory (the pairs on this host) and TCP.
  struct Primary {
    std::vector<std::unique_ptr<algorithms::Link>> links;
    std::vector<std::string> names;               // path names: "shm", "tcp", ...
    std::vector<transport::Transport*> carriers;  // the transports behind them
    std::vector<std::vector<bool>> peers;         // FailoverParams::path_peers
    std::string transport;                        // the group's: "tcp", "shm", "shm+tcp"
    std::vector<std::string> paths;               // by rank, the pair's first path
  };
  // By rank, the peers that shared memory carries, where the group mixes transports: its
  // members on several hosts, some pair of them on one (any pair: a member alone on its
  // host runs the same paths, all its pairs on TCP), and TCP the table's transport for the
  // whole group. Empty: one transport carries the group.
  std::vector<bool> pairs_on_shared_memory(const transport::GroupSpec& spec) const;
  Result<Primary> connect_mixed(const transport::GroupSpec& spec, const std::vector<bool>& local,
                                Deadline deadline);
  // A mixed group's link without failover: each pair on its primary path
  // (transport/pair_route_link.h).
  Result<std::unique_ptr<algorithms::Link>> with_routes(const transport::GroupSpec& spec,
                                                        Primary primary);
  // The failover link over the primary paths and the standbys (in path order), or the
  // primary link alone (logged why).
  Result<std::unique_ptr<algorithms::Link>> with_standby(
      const transport::GroupSpec& spec, Primary primary,
      std::vector<Result<std::unique_ptr<algorithms::Link>>> standbys, bool* failover);
  // The path name of failover path `index` in the current group (0: the table's).
  std::string path_name(int index, bool current) const;
  // The first path of the current group that carries the pair with `rank`.
  int first_group_path(int rank) const;
  void on_path_change(std::uint64_t epoch, const transport::PathChange& change);

  std::unique_ptr<transport::TcpEndpoint> endpoint_;
  std::unique_ptr<transport::TransportTable> table_;
  // Under "shm" or "rdma" only: TCP outside the table, as their source of connections.
  std::unique_ptr<transport::Transport> tcp_only_channels_;
  transport::RdmaTransport* rdma_ = nullptr;  // owned by table_; nullptr when not in it
  // With failover: the standby paths' listeners and transports, one per data address but
  // the first (one over the only address when there is one), in path order (empty
  // without). Standby k is advertised and logged as standby_name(k).
  std::vector<std::unique_ptr<transport::TcpEndpoint>> standby_endpoints_;
  std::vector<std::unique_ptr<transport::TcpTransport>> standbys_;
  transport::TcpTransport* tcp_ = nullptr;  // the table's TCP entry (owned by table_); nullptr when not in it
  transport::ShmTransport* shm_ =
      nullptr;  // the table's shared memory (owned by table_), or nullptr
  // Re-dials the current group's TCP paths whose connections failed (path_redialer.h).
  std::unique_ptr<PathRedialer> redialer_;
  Duration stall_timeout_{};
  transport::PathChoice failover_ = transport::PathChoice::kAuto;  // DataPlaneConfig::failover
  transport::TlsConfig tls_;  // advertised (capabilities()): every member must use the same
  std::vector<std::string> addresses_;
  Logger log_{"link"};
  mutable std::mutex mu_;
  std::uint64_t group_epoch_ = 0;
  std::string group_transport_;
  std::vector<std::uint64_t> group_members_;
  std::vector<std::string> group_addresses_;  // by rank: the view's data_address
  // The current group's failover paths (the primary paths, then the standbys in use):
  // names, transports, and which pairs each carries (FailoverParams::path_peers).
  std::vector<std::string> group_path_names_;
  std::vector<transport::Transport*> group_path_carriers_;
  std::vector<std::vector<bool>> group_path_peers_;
  // by rank: the index of the path in use in the above, -1 none
  std::vector<int> group_path_;
  std::vector<std::uint32_t> group_moves_;       // by rank, this group's
  std::vector<std::string> group_last_move_;     // by rank: "from -> to (cause)"
  std::vector<PathChangeCount> path_changes_;
  std::atomic<std::uint64_t> path_change_total_{0};
};

// Failover path names of the standbys: "tcp-standby", then "tcp-standby-2", "tcp-standby-3".
std::string standby_name(std::size_t k);

// "host[:port]" (or "[v6][:port]", or a bare IPv6 address) with `port` filled in when
// missing; kInvalidArgument on anything else.
Result<std::string> complete_address(const std::string& address, std::uint16_t port);

}  // namespace tributary::agent
