// The "tributary" torch.distributed backend: a c10d::ProcessGroup whose collectives run on a
// Tributary Worker. tributary/torch/__init__.py registers it with
// torch.distributed.Backend.register_backend, so a script that calls
// dist.init_process_group("tributary", ...) and wraps its model in DistributedDataParallel
// trains over Tributary unchanged (the coordinator and secret come from TRIBUTARY_COORDINATOR
// and TRIBUTARY_SECRET).
//
// Contract:
//  - A fixed world, as torch.distributed expects: the cluster must have exactly the group's
//    size when it joins, and a collective that completes with fewer contributors (a member
//    died and the survivors re-ran it) fails with an error that says so, rather than hand DDP
//    a sum over fewer members than it divides by. Elastic training is
//    tributary.torch.ElasticTrainer. Members leaving at the end (destroy_process_group) do
//    not fail one still finishing its last collective: it completes under the commit rule.
//  - Ranks: torch's numbering is kept; roots and block orders are translated to the
//    coordinator's numbering (rank_map.h), exchanged once through torch's store.
//  - Asynchrony and order: every collective returns a Work at once and runs on the group's
//    CollectiveQueue (agent/collective_queue.h) in call order; Work::wait() and the Work's
//    Future (which DDP's reducer waits on) complete when it is done. Tensors are referenced
//    by the job until then; the caller must not modify them before (as with every backend).
//  - Tensors: dense CPU tensors, one per process per call, contiguous (inputs that are not
//    are rejected, never silently copied). Reductions take float32/64, float16, bfloat16,
//    int8, uint8, int32, int64 with SUM, AVG, PRODUCT, MIN, MAX; data movement (broadcast,
//    gathers, scatter, all-to-all) takes any dtype as bytes. Bad input raises at the call,
//    before anything is queued; disagreement across ranks (count, dtype) fails the Work on
//    every rank with the Mismatch text.
//  - Every wait is bounded: Work::wait() without a timeout waits at most the group's timeout.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>

#include "agent/collective_queue.h"
#include "agent/worker.h"
#include "python/torch_backend/rank_map.h"

namespace tributary::python::torch_backend {

// A queued collective as torch sees it.
class TributaryWork final : public c10d::Work {
 public:
  TributaryWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                std::chrono::milliseconds default_timeout);
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // From the queue's thread: completes the Work and its Future.
  void complete(const Status& status);

 private:
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds default_timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupTributary final : public c10d::ProcessGroup {
 public:
  ProcessGroupTributary(int rank, int size, std::unique_ptr<agent::Worker> worker, RankMap ranks,
                        std::chrono::milliseconds timeout);
  ~ProcessGroupTributary() override;

  const std::string getBackendName() const override { return "tributary"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  using Job = std::function<Result<agent::Outcome>(agent::Worker&)>;
  // Queues `job`; the Work completes with its Status, or with an error when fewer members
  // than the group's size contributed.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         Job job);
  int worker_root(std::int64_t torch_root) const;

  std::unique_ptr<agent::Worker> worker_;
  std::unique_ptr<agent::CollectiveQueue> queue_;
  RankMap ranks_;
  std::chrono::milliseconds timeout_;
};

// Starts a Worker (joins the cluster at config.coordinator, waiting for `size` members),
// exchanges ranks through `store` and returns the group. Bounded by config.join_timeout.
Result<c10::intrusive_ptr<ProcessGroupTributary>> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, agent::WorkerConfig config);

}  // namespace tributary::python::torch_backend
