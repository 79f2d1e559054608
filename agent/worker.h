// The agent runtime linked into a training process: joins the cluster through the
// coordinator, builds the data-plane links of the current view, and runs collectives.
//
// Threading: one thread calls the collectives (as with NCCL communicators); the Worker's
// own background activity (heartbeats, view watching, metrics, and moving to a new view
// while no call runs) never touches user buffers. rank(), size() and epoch() may be called
// from any thread and never wait: they describe the view this member adopted last, which
// a move between calls may change at any time.
// Buffers: each call reads `send` and writes `recv` only until it returns.
//
// Fault tolerance (docs/fault-tolerance.md): every collective is all-or-nothing across
// the members of its epoch. When a member fails mid-collective, the call does not fail:
// the survivors agree through the coordinator whether the collective committed; if not,
// they re-run it in the next epoch with the original inputs (kept aside by the runtime).
// The Outcome says which epoch the result comes from and how many members contributed.
// Calls fail only for what a retry cannot fix: mismatched arguments across ranks, this
// member evicted, no quorum before the recovery deadline.
//
// Elasticity: the training loop calls step_boundary() before each step. Joins, drains
// and view changes happen there, and a joiner receives the registered training state
// (register_state) from a current member, verified by a SHA-256 hash.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "agent/federated_round.h"
#include "transport/tcp/tls.h"
#include "algorithms/collectives.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/status.h"
#include "transport/receive_paths.h"

namespace tributary::control_client {
class ControlPlane;
}

namespace tributary::agent {

struct WorkerConfig {
  std::string coordinator = "tcp://127.0.0.1:7070";  // ZeroMQ endpoint of the coordinator
  std::string secret;                                // the cluster secret; never sent
  std::string host;                                  // host label; default: hostname
  // The member's name in views, logs and `tributary status`; default "HOST/PROGRAM:PID",
  // which says nothing where every process is PID 1 (containers: pass the pod's name).
  std::string name;
  std::string zone;                                  // zone / datacenter label
  std::string bind_host = "127.0.0.1";               // data-plane listen address
  std::uint16_t data_port = 0;                       // 0: ephemeral
  std::string advertise_host;                        // the address peers dial; default: bind_host
  // Data addresses peers dial, "host[:port]" in order of preference (port: the
  // listener's); each pair uses the first that connects. Empty: advertise_host/bind_host.
  std::vector<std::string> data_addresses;
  // "auto" (shared memory with members on this host, TCP otherwise), "shm" or "tcp".
  std::string transport = "auto";
  std::uint64_t shm_ring_bytes = std::uint64_t{4} << 20;  // per pair and direction
  // Receives that reduce as the bytes arrive, and shared-memory messages read straight from
  // the sender's memory (docs/transports.md): auto turns each on where this host runs more
  // of the group's ranks than it has cores (single copy: at least twice as many), where
  // they pay.
  transport::PathChoice fused_receive = transport::PathChoice::kAuto;
  transport::PathChoice shm_single_copy = transport::PathChoice::kAuto;
  // Standby TCP paths per pair (a listener per data address but the first, or one over
  // the only address; their own connections): a pair whose path fails, or makes no
  // progress for `stall_timeout`, moves to the next and resumes the collective where it
  // stood, without a view change (agent/data_plane.h, docs/transports.md "Runtime
  // fallback"). auto: where there is another network to fall back to (two or more data
  // addresses, or an RDMA device, whose fallback is TCP), for groups not on shared memory.
  transport::PathChoice failover = transport::PathChoice::kAuto;
  std::chrono::milliseconds stall_timeout{2000};
  // TLS on data-plane TCP links (transport/tcp/tls.h, docs/security.md): off, between zones, or on
  // every pair; certificates or the pre-shared key derived from `secret`. Every member
  // must use the same mode and kind of key (a mismatch is refused at the handshake).
  transport::TlsConfig tls;
  // One connection attempt to one address of a peer, before the next address is tried.
  std::chrono::milliseconds connect_attempt_timeout{1000};
  std::chrono::milliseconds join_timeout{30000};
  // Cap on each attempt of a collective (the data phase and its commit round): an attempt
  // still running after it fails with kTimedOut and is recovered like any other failure
  // (reported, new view, re-run). Zero: only the adaptive deadline below.
  std::chrono::milliseconds collective_timeout{30000};
  std::size_t chunk_bytes = 256 * 1024;
  algorithms::AllReduceAlgorithm algorithm = algorithms::AllReduceAlgorithm::kAuto;
  // The link between zones, for the cost model's choice between flat and hierarchical
  // all-reduce when the view spans several zones (members' `zone` labels). Every member
  // must give the same values (they choose the cross-zone algorithm from them).
  double wan_bandwidth_bps = 1e9;  // bits per second, per direction
  std::chrono::microseconds wan_latency{1000};
  std::string metrics_bind;  // "127.0.0.1:0" serves /metrics; empty: no endpoint
  // Data-plane progress deadline of a collective: floor + slack x bytes / measured
  // throughput (an EWMA of this worker's recent collectives).
  std::chrono::milliseconds deadline_floor{5000};
  double deadline_slack = 8.0;
  // Bound on one recovery (waiting for a view, Ready/Go, reconnecting), and on the
  // whole retry loop of one collective.
  std::chrono::milliseconds recovery_timeout{60000};
  int min_world_size = 1;  // below this, wait (bounded by recovery_timeout) for joiners
  bool agreement = true;   // the commit round after each collective (docs/fault-tolerance.md)
  // All-reduces of at most this many bytes skip the commit round: a member that completes
  // one returns at once and keeps a private copy of the result until a later collective
  // proves every member holds it; after a failure, members that lack a result another
  // survivor returned get it from that copy (docs/fault-tolerance.md, "Small all-reduces:
  // speculative return"). Larger ones and other collectives keep the round. 0: every
  // collective runs the round. Every member must use the same value.
  std::size_t speculative_max_bytes = 256 * 1024;
  // Measure every view's ring links when they come up and fit the cost model to the
  // slowest (algorithms/link_probe.h, CostModel::fitted_to); over several host labels,
  // measure every pair and order the ring by bandwidth (algorithms/ring_order.h); then
  // refit alpha and beta to the all-reduces the members run, agreed at step boundaries
  // (algorithms/cost_refit.h, docs/algorithms.md). Every member must use the same value.
  bool measure_links = true;
  // Gradient compression for all_reduce_compressed(): a spec such as "qint8:bucket=512",
  // "topk:density=0.01", "powersgd:rank=2" (compression/collectives/compression_plan.h);
  // "float32" sends plain floats. Every member must use the same spec.
  std::string codec = "float32";
  // The codec across zones ("qint8", "topk:density=0.01", ...): when set and an
  // all_reduce_compressed runs hierarchical by zone, `codec` (which must then be float32)
  // applies inside each zone and this one between them, with error feedback kept per
  // tier (docs/zones.md). Empty: the same as inside. Every member must use the same spec.
  std::string wan_codec;
  std::uint64_t codec_seed = 1;
};

// A matrix inside a flat gradient tensor (PowerSGD compresses these, sends the rest raw).
struct TensorMatrix {
  std::size_t offset = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
};

// What a Worker runs on besides its config. Every part is optional: tests replace them.
struct WorkerEnvironment {
  // The coordinator (control_client/control_plane.h); nullptr: a CoordinatorClient to
  // WorkerConfig::coordinator. Tests: control_client::MemoryCoordinator::connect().
  std::unique_ptr<control_client::ControlPlane> control;
  // The Worker's clock; nullptr: the steady clock. It must outlive the Worker. It times
  // the steps reported to the straggler policy (the time a step spends outside
  // collectives) and is the epoch machine's time: the deadlines it moves to a view by
  // (recovery_timeout, join_timeout for the first view, the nudges for a view that does
  // not come) pass on it. The waits that carry them out are real and get what remains on
  // it, so a clock that does not move never lets them pass: a test that injects one drives it.
  const Clock* clock = nullptr;
  // Builds the links of each view (its epoch, this member's rank, the view's size) instead
  // of the data plane's transports: tests run Workers over an in-memory fabric to fail a
  // rank at an exact message. Empty: the data plane connects (the only production use).
  std::function<Result<std::unique_ptr<algorithms::Link>>(std::uint64_t epoch, int rank,
                                                          int size)>
      connect_links;
};

// What step_boundary() did.
struct BoundaryOutcome {
  bool left = false;  // this worker drained and left the cluster
  bool view_changed = false;
  bool received_state = false;  // this worker joined and got the training state
  // With received_state: what came, from whom, and the SHA-256 (hex) it was verified by.
  std::uint64_t state_bytes = 0;
  int state_source_rank = -1;
  std::string state_sha256;
  std::uint64_t epoch = 0;
  int world_size = 0;
};

// What a collective reports besides its data.
struct Outcome {
  std::uint64_t epoch = 0;                     // the epoch whose members produced the result
  int contributors = 0;                        // members whose inputs are in the result
  int attempts = 1;                            // 1 + re-runs after aborts
  std::vector<std::uint64_t> contributor_ids;  // member ids of the contributors, by rank
  algorithms::AllReduceAlgorithm algorithm =
      algorithms::AllReduceAlgorithm::kAuto;  // all_reduce only
};

class Worker {
 public:
  // Listens on the data port, joins, waits for the first view and connects its links.
  static Result<std::unique_ptr<Worker>> start(const WorkerConfig& config);
  // The same on a given environment (tests: an in-process control plane, a fake clock).
  static Result<std::unique_ptr<Worker>> start(const WorkerConfig& config,
                                               WorkerEnvironment environment);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int rank() const;
  int size() const;
  std::uint64_t epoch() const;
  std::uint64_t member_id() const;
  std::uint16_t data_port() const;
  std::uint16_t metrics_port() const;  // 0 when no metrics endpoint
  // What the cost model (fitted to this view's links: docs/algorithms.md) predicts for one
  // all-reduce of `bytes` with `algorithm` (kAuto: its own choice) in the current view, in
  // seconds; a ranking device, printed by `tributary bench` beside what it measured.
  double predicted_all_reduce_seconds(std::size_t bytes,
                                      algorithms::AllReduceAlgorithm algorithm) const;

  Result<Outcome> all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                             ReduceOp op);
  Result<Outcome> reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                 ReduceOp op);
  Result<Outcome> all_gather(const void* send, void* recv, std::size_t send_count, DType dtype);
  Result<Outcome> broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root);
  Result<Outcome> reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                         int root);
  Result<Outcome> gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                         int root);
  Result<Outcome> scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                          int root);
  Result<Outcome> all_to_all(const void* send, void* recv, std::size_t count_per_peer, DType dtype);
  // Counts and offsets in elements, one per rank (algorithms::all_to_all_v). Not in-place.
  Result<Outcome> all_to_all_v(const void* send, std::span<const std::size_t> send_counts,
                               std::span<const std::size_t> send_offsets, void* recv,
                               std::span<const std::size_t> recv_counts,
                               std::span<const std::size_t> recv_offsets, DType dtype);
  Result<Outcome> barrier();

  // All-reduce (sum or avg) of a float32 gradient through WorkerConfig::codec, with error
  // feedback kept per `tensor_id` across steps and views (docs/compression.md). Same
  // all-or-nothing guarantee as all_reduce: on an aborted attempt the residuals are
  // restored before the re-run, so no gradient mass is counted twice.
  // `step` is the training step (the codec's RNG key and top-k's warm-up clock): it must
  // be equal on every member, so take it from registered state that a joiner receives; a
  // member that disagrees fails the collective with kMismatch.
  // `wire_bytes` (optional) receives this rank's compressed bytes on the wire (with a
  // codec across zones: those it sent across zones; the float32 zone tier is not counted).
  Result<Outcome> all_reduce_compressed(float* data, std::size_t count, ReduceOp op,
                                        std::uint64_t tensor_id, std::uint64_t step,
                                        std::span<const TensorMatrix> matrices = {},
                                        std::uint64_t* wire_bytes = nullptr);

  // A federated round (agent/federated_round.h, docs/federated.md): contributes `data` (plus
  // its residual for round.tensor_id, which is then cleared) with round.weight; on return a
  // contributor's `data` holds the weighted mean over the round's contributors, the same
  // bits on every contributor. A late member gets contributed = false and `data` untouched
  // (folded into its residual or dropped, as round.late says). Below min_participants:
  // kRoundFailed on every member, nothing changed. kInvalidArgument for a weight that is
  // not finite and > 0, a non-positive deadline or min_participants, a round >= 2^56, or a
  // residual of another count.
  Result<FederatedOutcome> federated_round(float* data, std::size_t count,
                                           const FederatedRound& round);

  // Registers training state (parameters, optimizer state, progress counters) that a
  // joiner must receive before it contributes. The span must stay valid for the Worker's
  // life; every member registers the same names with the same sizes, in any order.
  void register_state(const std::string& name, std::span<std::byte> bytes);
  // The step boundary: syncs state to/from joiners, admits joiners, completes a drain,
  // adopts a newer view. Call it before each training step.
  Result<BoundaryOutcome> step_boundary();
  // Asks to leave at the next step boundary (async-signal-safe: only sets a flag).
  void drain();
  bool draining() const;
  // The step counter reported to the coordinator (straggler policy, dashboards).
  std::uint64_t step() const;

  // Leaves the cluster cleanly (also done by the destructor).
  Status leave();

  // Gives up now, from any thread (torch's ProcessGroup::abort): the running collective's
  // links are aborted and it returns kAborted with `why` instead of recovering, and so does
  // every later call; nothing else is waited for. leave() (or the destructor) still ends
  // the membership.
  void abort(const Status& why);

  class Impl;

 private:
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary::agent
