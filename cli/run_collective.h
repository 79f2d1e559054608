// Dispatches a CollectiveKind to the Worker's typed entry points.
#pragma once

#include "agent/worker.h"
#include "cli/collective_kind.h"

namespace tributary::cli {

Result<agent::Outcome> run_collective(agent::Worker& worker, CollectiveKind kind, const void* send,
                                      void* recv, const BufferShape& shape, DType dtype,
                                      ReduceOp op, int root);

}  // namespace tributary::cli
