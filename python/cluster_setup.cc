#include "python/cluster_setup.h"

#include <algorithm>
#include <thread>

#include "control_client/status_client.h"
#include "coordinator/coordinator.h"
#include "core/log.h"

namespace tributary::python {

EmbeddedCoordinator::EmbeddedCoordinator(std::unique_ptr<coordinator::Coordinator> c)
    : coordinator_(std::move(c)) {}

EmbeddedCoordinator::~EmbeddedCoordinator() { coordinator_->stop(); }

Result<std::unique_ptr<EmbeddedCoordinator>> EmbeddedCoordinator::start(const std::string& bind,
                                                                        const std::string& secret,
                                                                        int world_size,
                                                                        bool serve_jobs) {
  if (world_size < 1) {
    return error(StatusCode::kInvalidArgument,
                 "an embedded coordinator needs a world size >= 1, got " +
                     std::to_string(world_size));
  }
  coordinator::CoordinatorConfig config;
  config.bind_address = bind;
  config.secret = secret;
  config.initial_world_size = static_cast<std::size_t>(world_size);
  config.serve_jobs = serve_jobs;
  config.metrics_address.clear();  // the training process serves no /metrics of its own
  auto c = std::make_unique<coordinator::Coordinator>(config, Logger("coordinator"));
  TRIB_RETURN_IF_ERROR(c->start());
  return std::unique_ptr<EmbeddedCoordinator>(new EmbeddedCoordinator(std::move(c)));
}

std::string EmbeddedCoordinator::endpoint() const { return coordinator_->endpoint(); }

std::size_t EmbeddedCoordinator::member_count() const { return coordinator_->member_count(); }

void EmbeddedCoordinator::wait_until_empty(Deadline deadline) const {
  while (coordinator_->member_count() > 0 && !deadline.passed()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status check_world_forms(const std::string& endpoint, const std::string& secret, int world_size,
                         Duration timeout) {
  TRIB_ASSIGN_OR_RETURN(membership::ClusterStatus s,
                        control_client::fetch_status(endpoint, secret, timeout));
  const std::string n = std::to_string(world_size);
  const auto in_view = std::count_if(s.members.begin(), s.members.end(),
                                     [](const membership::MemberStatus& m) { return m.in_view; });
  if (s.phase == "resuming") return Status::ok();  // its journaled world comes back first
  if (s.phase == "forming") {
    if (s.world_size == static_cast<std::uint32_t>(world_size)) return Status::ok();
    return error(StatusCode::kMismatch,
                 "the coordinator at " + endpoint + " forms a world of " +
                     std::to_string(s.world_size) + " members (it was started with --world-size " +
                     std::to_string(s.world_size) + ") but this torch.distributed group has " + n +
                     ": start it with --world-size " + n +
                     ", or unset TRIBUTARY_COORDINATOR and the group starts its own");
  }
  if (s.phase == "empty") {
    if (world_size == 1) return Status::ok();
    return error(StatusCode::kUnavailable,
                 "the coordinator at " + endpoint + " formed its world already (view " +
                     std::to_string(s.epoch) +
                     "; its members have left): it admits new members one at a time into that "
                     "world, so " + n +
                     " members joining now would not start together. Start it with --serve-jobs "
                     "to serve one job after another, start one per job, or unset "
                     "TRIBUTARY_COORDINATOR and the group starts its own");
  }
  return error(StatusCode::kUnavailable,
               "the coordinator at " + endpoint + " serves a running world of " +
                   std::to_string(in_view) + " members (view " + std::to_string(s.epoch) +
                   "): another job uses it. Start one coordinator per job (or one with "
                   "--serve-jobs, which serves them one after another), or unset "
                   "TRIBUTARY_COORDINATOR and the group starts its own");
}

}  // namespace tributary::python
