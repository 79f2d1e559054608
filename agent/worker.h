// The agent runtime linked into a training process: joins the cluster through the
// coordinator, builds the data-plane links of the current view, and runs collectives.
//
// Threading: one thread calls the collectives (as with NCCL communicators); the Worker's
// own background activity (heartbeats, metrics) never touches user buffers.
// Buffers: each call reads `send` and writes `recv` only until it returns.
// Failures: a collective that fails returns the Status (peer lost, timed out, mismatch...)
// and the current epoch's links are abandoned; see docs/errors.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tributary {

struct WorkerConfig {
  std::string coordinator = "tcp://127.0.0.1:7070";  // ZeroMQ endpoint of the coordinator
  std::string secret;                                 // the cluster secret; never sent
  std::string host;                                   // host label; default: hostname
  std::string zone;                                   // zone / datacenter label
  std::string bind_host = "127.0.0.1";                // data-plane listen address
  std::uint16_t data_port = 0;                        // 0: ephemeral
  std::chrono::milliseconds join_timeout{30000};
  std::chrono::milliseconds collective_timeout{30000};
  std::size_t chunk_bytes = 256 * 1024;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  std::string metrics_bind;  // "127.0.0.1:0" serves /metrics; empty: no endpoint
};

// What a collective reports besides its data.
struct Outcome {
  std::uint64_t epoch = 0;     // the epoch the collective ran in
  int contributors = 0;        // members whose inputs are in the result
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;  // all_reduce only
};

class Worker {
 public:
  // Listens on the data port, joins, waits for the first view and connects its links.
  static Result<std::unique_ptr<Worker>> start(const WorkerConfig& config);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int rank() const;
  int size() const;
  std::uint64_t epoch() const;
  std::uint64_t member_id() const;
  std::uint16_t data_port() const;
  std::uint16_t metrics_port() const;  // 0 when no metrics endpoint

  Result<Outcome> all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                             ReduceOp op);
  Result<Outcome> reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                 DType dtype, ReduceOp op);
  Result<Outcome> all_gather(const void* send, void* recv, std::size_t send_count, DType dtype);
  Result<Outcome> broadcast(const void* send, void* recv, std::size_t count, DType dtype,
                            int root);
  Result<Outcome> reduce(const void* send, void* recv, std::size_t count, DType dtype,
                         ReduceOp op, int root);
  Result<Outcome> gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                         int root);
  Result<Outcome> scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                          int root);
  Result<Outcome> all_to_all(const void* send, void* recv, std::size_t count_per_peer,
                             DType dtype);
  Result<Outcome> barrier();

  // Leaves the cluster cleanly (also done by the destructor).
  Status leave();

  class Impl;

 private:
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary
