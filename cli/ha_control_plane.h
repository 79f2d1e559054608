// `tributary demo --ha`: a local etcd and several replicated coordinators sharing it
// (docs/fault-tolerance.md, "Replicated coordinators"), and what the demo does to them:
// find the leader (etcd's leader key), kill it, watch a standby take over.
//
// Every wait is bounded; destruction stops the coordinators and etcd and removes etcd's
// data directory.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/child_process.h"

namespace tributary::coordinator_store {
class EtcdClient;
}

namespace tributary::cli {

class HaControlPlane {
 public:
  // Starts etcd on free loopback ports (Debian's etcd-server: scripts/deps.sh), then
  // `coordinators` coordinators for `world_size` members, `extra_args` passed to each.
  // `log_dir`: each coordinator's output goes to coordinator-I.log there ("": inherited).
  static Result<std::unique_ptr<HaControlPlane>> start(int world_size, int coordinators,
                                                       const std::vector<std::string>& extra_args,
                                                       Deadline deadline,
                                                       const std::string& log_dir = "");
  ~HaControlPlane();
  HaControlPlane(const HaControlPlane&) = delete;
  HaControlPlane& operator=(const HaControlPlane&) = delete;

  // Every coordinator's endpoint, comma-separated: what agents are given.
  std::string endpoints() const;
  // The leader's endpoint from etcd (empty while there is none, or etcd does not answer).
  std::string leader();
  // kill -9 of the coordinator at `endpoint`; false when it is not one of ours.
  bool kill(const std::string& endpoint);

 private:
  HaControlPlane() = default;
  std::string dir_;
  std::optional<ChildProcess> etcd_;
  std::vector<ChildProcess> coordinators_;
  std::vector<std::string> endpoints_;
  std::unique_ptr<coordinator_store::EtcdClient> client_;
};

}  // namespace tributary::cli
