// rdma_verbs.h in a build without libibverbs (CMake did not find infiniband/verbs.h or
// the library): there is no device to open, and the RDMA transport is left out of the
// agent's table (agent/data_plane.cc).
#include "transport/rdma_verbs.h"

namespace tributary::transport {

bool rdma_verbs_built() { return false; }

Result<std::shared_ptr<VerbsDevice>> open_rdma_device(const std::string&) {
  return error(StatusCode::kUnavailable,
               "built without libibverbs (scripts/deps.sh installs libibverbs-dev)");
}

}  // namespace tributary::transport
