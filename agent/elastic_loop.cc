#include "agent/elastic_loop.h"

#include <thread>

namespace tributary::agent {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

bool transient(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kEvicted ||
         code == StatusCode::kTimedOut;
}

std::string ms(Duration d) { return std::to_string(duration_cast<milliseconds>(d).count()); }

}  // namespace

ElasticLoop::ElasticLoop(ElasticConfig config, Logger log)
    : config_(config), log_(std::move(log)) {}

void ElasticLoop::request_drain() {
  drain_.store(true);
  if (Worker* w = worker_.load()) w->drain();
}

void ElasticLoop::attach(Worker* worker) {
  worker_.store(worker);
  // A drain requested while joining applies to the Worker that just joined.
  if (worker != nullptr && drain_.load()) worker->drain();
}

std::string ElasticLoop::at_step(const ElasticWorkload& workload) const {
  return workload.position ? " at step " + std::to_string(workload.position()) : "";
}

Result<std::unique_ptr<Worker>> ElasticLoop::join(const ElasticWorkload& workload, bool first) {
  const TimePoint give_up = std::chrono::steady_clock::now() + config_.retry_for;
  for (;;) {
    auto worker = workload.start_worker();
    if (worker || drain_requested()) return worker;
    const bool retry = (!first || config_.retry_first_join) && transient(worker.status().code()) &&
                       std::chrono::steady_clock::now() < give_up;
    if (!retry) return worker;
    log_.warn("join refused (" + worker.status().to_string() + "); retrying in " +
              ms(config_.retry_delay) + " ms");
    std::this_thread::sleep_for(config_.retry_delay);
  }
}

Result<ElasticReport> ElasticLoop::run(const ElasticWorkload& workload) {
  ElasticReport report;
  std::unique_ptr<Worker> worker;
  // Whatever way run() returns, request_drain() must not reach a destroyed Worker.
  struct Detach {
    ElasticLoop* loop;
    ~Detach() { loop->attach(nullptr); }
  } detach{this};
  for (;;) {
    if (!worker) {
      auto joined = join(workload, report.joins == 0);
      if (!joined && drain_requested()) {
        report.drained = true;
        return report;
      }
      TRIB_ASSIGN_OR_RETURN(worker, std::move(joined));
      ++report.joins;
      workload.register_state(*worker);
      attach(worker.get());
    }
    auto boundary = worker->step_boundary();
    if (!boundary) {
      if (boundary.status().code() != StatusCode::kEvicted) return boundary.status();
      ++report.evictions;
      log_.warn("evicted" + at_step(workload) + " (" + boundary.status().message() +
                "); rejoining in " + ms(config_.rejoin_delay) + " ms");
      attach(nullptr);
      worker.reset();
      std::this_thread::sleep_for(config_.rejoin_delay);
      continue;
    }
    if (boundary->left) {
      log_.info("drained" +
                (workload.position ? " after step " + std::to_string(workload.position())
                                   : std::string()) +
                " and left the cluster");
      report.drained = true;
      report.left = true;
      return report;
    }
    auto next = workload.step(*worker, *boundary);
    if (!next) {
      if (next.status().code() == StatusCode::kEvicted) continue;  // the boundary rejoins
      return next.status();
    }
    if (*next == StepResult::kFinished) break;
    if (*next == StepResult::kDrain) request_drain();
  }
  report.world_size = worker->size();
  report.rank = worker->rank();
  report.epoch = worker->epoch();
  attach(nullptr);
  TRIB_RETURN_IF_ERROR(worker->leave());
  return report;
}

}  // namespace tributary::agent
