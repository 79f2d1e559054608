#include "cli/soak_workload.h"

// Implemented by the fault-tolerance test work (issue 4); until then the workload says so.
namespace tributary {

Status run_soak(const std::function<Result<std::unique_ptr<Worker>>()>&, const SoakSpec&,
                std::FILE*) {
  return error(StatusCode::kInvalidArgument, "the soak workload is not implemented yet");
}

}  // namespace tributary
