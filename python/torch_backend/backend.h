// The "tributary" torch.distributed backend: a c10d::Backend (torch 2.x) whose collectives run
// on a Tributary Worker and whose point-to-point messages run on links of their own.
// tributary/torch/__init__.py registers it for the "cpu" device (and "cuda" when torch has CUDA)
// with torch.distributed.Backend.register_backend, so a script that calls
// dist.init_process_group("tributary") (under torchrun, or with any init_method) and wraps its
// model in DistributedDataParallel or FSDP trains over Tributary unchanged.
//
// This layer is thin on purpose: it checks torch's tensors, lays them out for the runtime's
// C++ API (agent/worker.h, python/point_to_point.h) and turns results into Works. It is the
// only code that includes torch headers, so the backend rebuilds against another torch
// without touching the runtime.
//
// Contract:
//  - One group, one communicator: the default group and every subgroup (new_group,
//    new_subgroups, split_group) is a Worker of its own in a cluster of its own (its own
//    coordinator, links, views and sequence numbers), so subgroups never see one another's
//    traffic. Non-members of a subgroup create nothing.
//  - A fixed world, as torch.distributed expects: the cluster must have exactly the group's
//    size when it forms, and a collective that completes with fewer contributors (a member
//    died and the survivors re-ran it) fails with an error that says so, rather than hand DDP
//    a sum over fewer members than it divides by. Elastic training is
//    tributary.torch.ElasticTrainer. Members leaving at the end (destroy_process_group) do
//    not fail one still finishing its last collective: it completes under the commit rule.
//  - Ranks: torch's numbering is kept; roots and block orders are translated to the
//    coordinator's numbering (rank_map.h), exchanged once through the group's store.
//  - Asynchrony and order: every collective returns a Work at once and runs on the group's
//    CollectiveQueue (agent/collective_queue.h) in call order; send / recv are posted at once
//    on the point-to-point links, outside that order (a recv posted before its send, or a
//    collective issued while a recv is pending, waits for nothing else). Work::wait() and the
//    Work's Future (which DDP's reducer waits on) complete when the operation is done.
//    Tensors are referenced until then; the caller must not modify them before.
//  - Tensors: CPU tensors, or CUDA tensors when torch has CUDA, one per process per call
//    (lists where torch's API has lists), all of one call on one device (a mix of CPU and CUDA
//    tensors is refused), contiguous (inputs that are not are rejected, never silently
//    copied); all_reduce also takes sparse COO tensors on the CPU (as gloo does: the members' indices and values are gathered and
//    summed in rank order, so every member holds the same bits). Reductions take float32/64,
//    float16, bfloat16, int8, uint8, int32, int64 with SUM, AVG, PRODUCT, MIN, MAX; data
//    movement (broadcast, gathers, scatter, all-to-all, send / recv) takes any dtype as bytes.
//    Bad input raises at the call, before anything is queued; disagreement across ranks
//    (count, dtype) fails the Work on every rank with the Mismatch text.
//  - CUDA tensors run the same host collective on pinned host twins (torch_staging.h,
//    device_staging.h), as torch's gloo backend does: at the call a pooled side stream waits
//    for an event on the caller's current stream and copies the inputs to the twins; the
//    queue's thread waits for those copies only (never the device or the default stream),
//    runs the collective, copies the results back on the side stream and records a completion
//    event; Work::wait() / synchronize() make the caller's current stream wait on it (the host
//    waits for the collective, not for the copy back), and the Work's Future is CUDA-aware
//    (it has the tensors' device), so DDP's reducer and comm hooks order their streams after
//    it. A collective that fails copies nothing back: the device tensors keep their values.
//    send stages its tensor before it is posted (the caller waits for that copy, bounded by
//    the group's timeout); recv copies back when the message is in.
//  - Every wait is bounded: Work::wait() without a timeout waits at most the group's timeout,
//    and a point-to-point operation not done by then fails. A wait that times out raises and
//    does not end the operation (the runtime's own deadlines do).
//  - abort() fails what is queued and the running collective at once (its links are
//    aborted) and every pending send / recv; shutdown() (destroy_process_group) lets queued
//    work finish (bounded by the group's timeout), then leaves the cluster and stops every
//    thread the group started (a hosted coordinator once the other members left, bounded).
//    Both are final: later calls raise. A Work's abort() aborts its group (a collective
//    cannot be taken back from one member alone). Groups still alive when the interpreter
//    exits are shut down by an atexit hook (tributary/torch/__init__.py), so that no thread
//    of theirs outlives the process's static objects.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/collective_queue.h"
#include "agent/worker.h"
#include "python/cluster_setup.h"
#include "python/point_to_point.h"
#include "python/torch_backend/rank_map.h"
#include "python/torch_backend/torch_staging.h"

namespace tributary::python::torch_backend {

class TributaryBackend;

// What a Work's abort() reaches: its group while the group lives. Works hold it weakly (they
// may outlive the group); the group's destructor clears `backend` first.
struct AbortTarget {
  std::mutex mu;
  TributaryBackend* backend = nullptr;  // guarded by mu
  void abort();
};

// One operation as torch sees it.
class TributaryWork final : public c10d::Work {
 public:
  TributaryWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                std::chrono::milliseconds default_timeout, std::weak_ptr<AbortTarget> abort_group,
                Staged staged);
  // Waits (bounded) for the operation on the host, then synchronize().
  bool wait(std::chrono::milliseconds timeout) override;
  // CUDA tensors: the calling thread's current stream waits for the copies back (a stream
  // wait, not a host wait). Nothing for CPU tensors or a Work that failed.
  void synchronize() override;
  void abort() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // A receive's sender (recvAnysource: known once a message was matched; dist.recv returns it).
  int sourceRank() const override;
  void set_source(int rank) { source_.store(rank); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // Completes the Work and its Future (the outputs as its value), from the thread that ran it.
  void complete(const Status& status);
  // The staging the queued job runs through (null for CPU tensors).
  const std::shared_ptr<DeviceStaging>& staging() const { return staging_; }

 private:
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<DeviceStaging> staging_;
  std::chrono::milliseconds default_timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<AbortTarget> abort_group_;
  std::atomic<int> source_{-1};
};

// How a group joins its cluster.
struct GroupSetup {
  agent::WorkerConfig worker;  // coordinator (empty: the group starts its own), secret, ...
  std::chrono::milliseconds timeout{1800000};  // torch's group timeout
  std::string coordinator_host = "127.0.0.1";  // where an embedded coordinator binds
};

class TributaryBackend final : public c10d::Backend {
 public:
  using Job = std::function<Result<agent::Outcome>(agent::Worker&)>;

  // Joins (or forms) the group's cluster and connects its point-to-point links; every member
  // of the group calls it with the same store. Bounded by setup.worker.join_timeout and the
  // store's own timeout.
  static Result<c10::intrusive_ptr<TributaryBackend>> create(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupSetup setup);
  TributaryBackend(int rank, int size, GroupSetup setup);
  ~TributaryBackend() override;

  const std::string getBackendName() const override { return "tributary"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
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
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  // dist.monitored_barrier, as gloo runs it (monitored_barrier.cc): synchronous; rank 0
  // raises naming the ranks that did not arrive within the timeout.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

#ifdef TRIBUTARY_TORCH_HAS_SPLIT
  bool supportsSplitting() const override { return true; }
  // What split_group hands back to split() (torch clones it for the child).
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // split_group: the members of `ranks` (this group's ranks) form a group of their own,
  // exactly as new_group would make it; the others get nothing.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
#endif

  void abort() override;
  void shutdown() override;

  // shutdown() of every group of this process that is still alive (the atexit hook).
  static void shutdown_all();

 private:
  // Lets issued work finish until `deadline`, then stops the queue, the point-to-point
  // engine, leaves, and stops a hosted coordinator. Idempotent.
  void finish(Deadline deadline);
  // Queues `job` (on the host tensors of `staged`); the Work completes with its Status, or
  // with an error when fewer members than the group's size contributed (then, as for any
  // failure, staged device tensors are not written).
  c10::intrusive_ptr<TributaryWork> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                            Staged staged, Job job);
  c10::intrusive_ptr<TributaryWork> make_work(c10d::OpType type, std::vector<at::Tensor> outputs,
                                              Staged staged = {});
  c10::intrusive_ptr<c10d::Work> allreduce_sparse_coo(const at::Tensor& t,
                                                      const c10d::ReduceOp& op);
  c10::intrusive_ptr<c10d::Work> allreduce_bitwise(const at::Tensor& t, const c10d::ReduceOp& op);
  PointToPoint& peers(const char* what, int peer);
  int worker_root(std::int64_t torch_root) const;
  Deadline op_deadline() const { return Deadline::after(setup_.timeout); }

  GroupSetup setup_;
  std::unique_ptr<EmbeddedCoordinator> coordinator_;  // when this member hosts the group's
  std::unique_ptr<agent::Worker> worker_;
  std::unique_ptr<agent::CollectiveQueue> queue_;
  std::unique_ptr<PointToPoint> p2p_;  // null for a group of one
  RankMap ranks_;
  std::shared_ptr<AbortTarget> abort_target_;
  // Held while an operation is handed to the queue or the point-to-point engine, and while
  // finish() takes them down: an operation after shutdown raises instead.
  std::mutex finish_mu_;
  bool finished_ = false;  // guarded by finish_mu_
  std::atomic<std::uint32_t> monitored_rounds_{0};  // monitoredBarrier calls so far (its tags)
  // Held by abort() while it closes the queue and the point-to-point engine, and by finish()
  // while it takes them away, so that abort() never reaches one being destroyed.
  std::mutex abort_mu_;
};

}  // namespace tributary::python::torch_backend
