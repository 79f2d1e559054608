#include "cli/run_collective.h"

namespace tributary::cli {

Result<agent::Outcome> run_collective(agent::Worker& w, CollectiveKind kind, const void* send,
                                      void* recv, const BufferShape& shape, DType dtype,
                                      ReduceOp op, int root) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return w.all_reduce(send, recv, shape.send_count, dtype, op);
    case CollectiveKind::kReduceScatter:
      return w.reduce_scatter(send, recv, shape.per_rank, dtype, op);
    case CollectiveKind::kAllGather: return w.all_gather(send, recv, shape.per_rank, dtype);
    case CollectiveKind::kBroadcast: return w.broadcast(send, recv, shape.send_count, dtype, root);
    case CollectiveKind::kReduce: return w.reduce(send, recv, shape.send_count, dtype, op, root);
    case CollectiveKind::kGather: return w.gather(send, recv, shape.per_rank, dtype, root);
    case CollectiveKind::kScatter: return w.scatter(send, recv, shape.per_rank, dtype, root);
    case CollectiveKind::kAllToAll: return w.all_to_all(send, recv, shape.per_rank, dtype);
    case CollectiveKind::kBarrier: return w.barrier();
  }
  return error(StatusCode::kInvalidArgument, "unknown collective");
}

}  // namespace tributary::cli
