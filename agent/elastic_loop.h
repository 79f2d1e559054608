// The elastic loop a training process runs around a Worker, written once for every
// workload (the CLI's training and soak workloads, the demo's workers, and the Python
// binding to come):
//
//   join -> register state -> { step boundary -> step }*
//        ^                            | evicted
//        +---- wait rejoin_delay -----+
//
// After an eviction (a straggler, a frozen VM that came back) the loop starts a new
// Worker, registers the state again and carries on: the new member receives the current
// state from a member at its first boundary, SHA-256 verified. A drain (request_drain(),
// wired to SIGTERM by the CLI) leaves at the next step boundary, so the others see a
// boundary, not a failure; one requested while joining stops the join retries (a join
// that still succeeds leaves at its first boundary).
//
// The workload is two callbacks: register the state a joiner must receive (after every
// join) and run one step (after every successful boundary). The loop owns the Worker: it
// leaves the cluster when the workload says it is finished.
//
// Join policy: a join that fails with a transient status (kUnavailable: a straggler's
// cool-down, a full or silent coordinator; kEvicted / kTimedOut: removed or timed out while
// the view changed under the joiner) is retried every retry_delay for up to retry_for; a
// first join only when retry_first_join (otherwise its failure is returned: the cluster is
// not there). Other failures are returned at once.
//
// Threading: run() on one thread; request_drain() from any thread or a signal handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "agent/worker.h"
#include "core/clock.h"
#include "core/log.h"

namespace tributary::agent {

struct ElasticConfig {
  Duration rejoin_delay = std::chrono::milliseconds(1500);  // after an eviction
  Duration retry_delay = std::chrono::milliseconds(1500);   // between refused joins
  Duration retry_for = std::chrono::seconds(120);           // then the refusal stands
  bool retry_first_join = false;
};

// What one step asks of the loop.
enum class StepResult : std::uint8_t {
  kContinue,  // next boundary, next step
  kFinished,  // leave the cluster and return
  kDrain,     // leave at the next boundary, like request_drain() (a time limit, say)
};

struct ElasticWorkload {
  // Starts a Worker: joins the cluster and connects (typically Worker::start).
  std::function<Result<std::unique_ptr<Worker>>()> start_worker;
  // Registers the training state with a freshly started Worker (Worker::register_state),
  // the same names and sizes every time.
  std::function<void(Worker&)> register_state;
  // One step after a successful boundary. kEvicted: the next boundary notices and the
  // loop rejoins; any other error ends the loop with it.
  std::function<Result<StepResult>(Worker&, const BoundaryOutcome&)> step;
  // Optional: the workload's global step, for log lines ("evicted at step N").
  std::function<std::int64_t()> position;
};

struct ElasticReport {
  bool drained = false;  // ended by a drain (left at a boundary, or asked while joining)
  bool left = false;     // ... and this member left the cluster at a step boundary
  int joins = 0;         // Workers started: 1 + rejoins
  int evictions = 0;
  // The cluster when the workload finished (not drained): for its summary line.
  int world_size = 0;
  int rank = -1;
  std::uint64_t epoch = 0;
};

class ElasticLoop {
 public:
  ElasticLoop(ElasticConfig config, Logger log);
  ElasticLoop(const ElasticLoop&) = delete;
  ElasticLoop& operator=(const ElasticLoop&) = delete;

  // Runs until the workload finishes (ok), a drain ends it (ok, report.drained), or an
  // error that is not an eviction (returned; the Worker is dropped, which leaves).
  Result<ElasticReport> run(const ElasticWorkload& workload);

  // Leave at the next step boundary (async-signal-safe: atomics only).
  void request_drain();
  bool drain_requested() const { return drain_.load(); }

 private:
  Result<std::unique_ptr<Worker>> join(const ElasticWorkload& workload, bool first);
  // The Worker that request_drain() reaches (nullptr: none).
  void attach(Worker* worker);
  std::string at_step(const ElasticWorkload& workload) const;

  ElasticConfig config_;
  Logger log_;
  std::atomic<bool> drain_{false};
  std::atomic<Worker*> worker_{nullptr};
};

}  // namespace tributary::agent
