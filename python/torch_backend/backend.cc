// The "tributary" torch.distributed backend (process_group.h) and its Python module,
// tributary.torch._c10d. The only translation unit that includes libtorch headers: they
// take most of a minute to compile on the development machines.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <optional>
#include <string>

#include "python/torch_backend/process_group.h"

namespace tributary::python::torch_backend {
namespace {

std::atomic<int> g_live_groups{0};

void check_dense_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "tributary: ", what, " is a ", t.device(),
              " tensor; this build of the tributary backend takes CPU tensors only (it was "
              "built without CUDA support): move it with .cpu()");
  TORCH_CHECK(t.layout() == c10::kStrided, "tributary: ", what, " is not a dense tensor");
  TORCH_CHECK(t.is_contiguous(), "tributary: ", what, " is not contiguous (sizes ", t.sizes(),
              ", strides ", t.strides(), "); pass .contiguous()");
}

std::optional<DType> dtype_of(c10::ScalarType s) {
  switch (s) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    default: return std::nullopt;
  }
}

// A tensor as elements to move: typed when Tributary knows the dtype (so that ranks that
// disagree about it fail with Mismatch), as bytes otherwise (bool, int16, complex, ...).
struct Elements {
  DType dtype;
  std::size_t count;
};

Elements elements(const at::Tensor& t) {
  if (auto d = dtype_of(t.scalar_type())) return {*d, static_cast<std::size_t>(t.numel())};
  return {DType::kUInt8, static_cast<std::size_t>(t.nbytes())};
}

Elements reduction_elements(const at::Tensor& t) {
  auto d = dtype_of(t.scalar_type());
  TORCH_CHECK(d.has_value(), "tributary: cannot reduce ", t.scalar_type(),
              " tensors; reductions take float32, float64, float16, bfloat16, int8, uint8, "
              "int32, int64");
  return {*d, static_cast<std::size_t>(t.numel())};
}

ReduceOp reduce_op(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProd;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    default:
      TORCH_CHECK(false, "tributary: reduction op ", static_cast<int>(op.op_),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "tributary: ", what, ": one tensor per process, got ",
              tensors.size());
  check_dense_cpu(tensors[0], what);
  return tensors[0];
}

// `list` holds one tensor per rank, each like `like` (dtype, element count).
std::vector<at::Tensor>& per_rank(std::vector<std::vector<at::Tensor>>& lists, int size,
                                  const at::Tensor& like, const char* what) {
  TORCH_CHECK(lists.size() == 1, "tributary: ", what, ": one tensor list per process, got ",
              lists.size());
  auto& list = lists[0];
  TORCH_CHECK(static_cast<int>(list.size()) == size, "tributary: ", what, ": ", list.size(),
              " tensors for a group of ", size);
  for (const at::Tensor& t : list) {
    check_dense_cpu(t, what);
    TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(),
                "tributary: ", what, ": every tensor must be ", like.scalar_type(), " with ",
                like.numel(), " elements, got ", t.scalar_type(), " with ", t.numel());
  }
  return list;
}

// The n equal blocks of a flat tensor, as views.
std::vector<at::Tensor> blocks(const at::Tensor& flat, int n) {
  const std::int64_t block = flat.numel() / n;
  at::Tensor view = flat.reshape({-1});
  std::vector<at::Tensor> out;
  for (int i = 0; i < n; ++i) out.push_back(view.narrow(0, i * block, block));
  return out;
}

// Per-torch-rank tensors into a flat buffer in Tributary's rank order, and back.
at::Tensor pack(const std::vector<at::Tensor>& by_torch_rank, const RankMap& ranks) {
  const int n = ranks.size();
  at::Tensor flat = at::empty({by_torch_rank.at(0).numel() * n}, by_torch_rank[0].options());
  std::vector<at::Tensor> out = blocks(flat, n);
  for (int w = 0; w < n; ++w) out[w].copy_(by_torch_rank[ranks.torch_rank(w)].reshape({-1}));
  return flat;
}

void unpack(const at::Tensor& flat, std::vector<at::Tensor>& by_torch_rank, const RankMap& ranks) {
  std::vector<at::Tensor> in = blocks(flat, ranks.size());
  for (int t = 0; t < ranks.size(); ++t) {
    by_torch_rank[t].reshape({-1}).copy_(in[ranks.worker_rank(t)]);
  }
}

}  // namespace

TributaryWork::TributaryWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                             std::chrono::milliseconds default_timeout)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      default_timeout_(default_timeout),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool TributaryWork::wait(std::chrono::milliseconds timeout) {
  const auto bound = timeout == kNoTimeout ? default_timeout_ : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  const bool done = cv_.wait_for(lock, bound, [&] { return completed_; });
  TORCH_CHECK(done, "tributary: ", c10d::opTypeToString(retrieveOpType()), " not done after ",
              bound.count(), " ms");
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void TributaryWork::complete(const Status& status) {
  if (status.is_ok()) {
    future_->markCompleted(c10::IValue(outputs_));
    finish();
    return;
  }
  auto failure = std::make_exception_ptr(std::runtime_error("tributary: " + status.to_string()));
  future_->setError(failure);
  finish(failure);
}

ProcessGroupTributary::ProcessGroupTributary(int rank, int size,
                                             std::unique_ptr<agent::Worker> worker, RankMap ranks,
                                             std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      worker_(std::move(worker)),
      queue_(std::make_unique<agent::CollectiveQueue>()),
      ranks_(std::move(ranks)),
      timeout_(timeout) {
  init();
}

ProcessGroupTributary::~ProcessGroupTributary() {
  // The running job's completion may call back into Python (a comm hook's Future
  // callback): never hold the GIL while joining the queue's thread.
  std::optional<pybind11::gil_scoped_release> release;
  if (Py_IsInitialized() && PyGILState_Check()) release.emplace();
  queue_.reset();
  (void)worker_->leave();
  --g_live_groups;
}

int ProcessGroupTributary::worker_root(std::int64_t torch_root) const {
  TORCH_CHECK(torch_root >= 0 && torch_root < size_, "tributary: root ", torch_root,
              " is not a rank of this group of ", size_);
  return ranks_.worker_rank(static_cast<int>(torch_root));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::enqueue(c10d::OpType type,
                                                              std::vector<at::Tensor> outputs,
                                                              Job job) {
  auto work = c10::make_intrusive<TributaryWork>(rank_, type, std::move(outputs), timeout_);
  const int size = size_;
  agent::Worker* w = worker_.get();
  queue_->submit(
      c10d::opTypeToString(type), [w, job = std::move(job)] { return job(*w); },
      [work, size](const Result<agent::Outcome>& r) {
        Status status = r.status();
        if (r && r->contributors != size) {
          status = error(StatusCode::kPeerLost,
                         "only " + std::to_string(r->contributors) + " of the group's " +
                             std::to_string(size) +
                             " members contributed (a member failed and the rest re-ran the "
                             "collective): torch.distributed groups have a fixed world; train "
                             "elastically with tributary.torch.ElasticTrainer");
        }
        work->complete(status);
      });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast tensor");
  const int root = worker_root(opts.rootRank);
  const Elements e = elements(t);
  return enqueue(c10d::OpType::BROADCAST, {t}, [t, e, root](agent::Worker& w) {
    return w.broadcast(t.data_ptr(), t.data_ptr(), e.count, e.dtype, root);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "all_reduce tensor");
  const Elements e = reduction_elements(t);
  const ReduceOp op = reduce_op(opts.reduceOp);
  return enqueue(c10d::OpType::ALLREDUCE, {t}, [t, e, op](agent::Worker& w) {
    return w.all_reduce(t.data_ptr(), t.data_ptr(), e.count, e.dtype, op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::reduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors, "reduce tensor");
  const Elements e = reduction_elements(t);
  const ReduceOp op = reduce_op(opts.reduceOp);
  const int root = worker_root(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, {t}, [t, e, op, root](agent::Worker& w) {
    return w.reduce(t.data_ptr(), t.data_ptr(), e.count, e.dtype, op, root);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  at::Tensor in = single(inputs, "all_gather input");
  std::vector<at::Tensor> out = per_rank(outputs, size_, in, "all_gather outputs");
  const Elements e = elements(in);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::ALLGATHER, out, [in, out, e, &ranks](agent::Worker& w) mutable {
    at::Tensor flat = at::empty({in.numel() * ranks.size()}, in.options());
    auto r = w.all_gather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype);
    if (r) unpack(flat, out, ranks);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  check_dense_cpu(input, "all_gather input");
  check_dense_cpu(output, "all_gather output");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "tributary: all_gather output must hold ", size_, " x ", input.numel(), " ",
      input.scalar_type(), " elements");
  const Elements e = elements(input);
  const RankMap& ranks = ranks_;
  at::Tensor in = input;
  at::Tensor out = output;
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {out}, [in, out, e, &ranks](agent::Worker& w) {
    if (ranks.identity()) return w.all_gather(in.data_ptr(), out.data_ptr(), e.count, e.dtype);
    at::Tensor flat = at::empty_like(out);
    auto r = w.all_gather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype);
    std::vector<at::Tensor> by_torch_rank = blocks(out, ranks.size());
    if (r) unpack(flat, by_torch_rank, ranks);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs, "gather input");
  const int root = worker_root(opts.rootRank);
  const bool is_root = opts.rootRank == rank_;
  std::vector<at::Tensor> out;
  if (is_root) {
    out = per_rank(outputs, size_, in, "gather outputs (on the root)");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "tributary: gather outputs are given on the root only");
  }
  const Elements e = elements(in);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::GATHER, out,
                 [in, out, e, root, is_root, &ranks](agent::Worker& w) mutable {
                   if (!is_root) return w.gather(in.data_ptr(), nullptr, e.count, e.dtype, root);
                   at::Tensor flat = at::empty({in.numel() * ranks.size()}, in.options());
                   auto r = w.gather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype, root);
                   if (r) unpack(flat, out, ranks);
                   return r;
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter output");
  const int root = worker_root(opts.rootRank);
  const bool is_root = opts.rootRank == rank_;
  std::vector<at::Tensor> in;
  if (is_root) {
    in = per_rank(inputs, size_, out, "scatter inputs (on the root)");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "tributary: scatter inputs are given on the root only");
  }
  const Elements e = elements(out);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::SCATTER, {out},
                 [in, out, e, root, is_root, &ranks](agent::Worker& w) {
                   if (!is_root) return w.scatter(nullptr, out.data_ptr(), e.count, e.dtype, root);
                   at::Tensor flat = pack(in, ranks);
                   return w.scatter(flat.data_ptr(), out.data_ptr(), e.count, e.dtype, root);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter output");
  std::vector<at::Tensor> in = per_rank(inputs, size_, out, "reduce_scatter inputs");
  const Elements e = reduction_elements(out);
  const ReduceOp op = reduce_op(opts.reduceOp);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::REDUCE_SCATTER, {out}, [in, out, e, op, &ranks](agent::Worker& w) {
    at::Tensor flat = pack(in, ranks);
    return w.reduce_scatter(flat.data_ptr(), out.data_ptr(), e.count, e.dtype, op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_dense_cpu(input, "reduce_scatter input");
  check_dense_cpu(output, "reduce_scatter output");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
      "tributary: reduce_scatter input must hold ", size_, " x ", output.numel(), " ",
      output.scalar_type(), " elements");
  const Elements e = reduction_elements(output);
  const ReduceOp op = reduce_op(opts.reduceOp);
  const RankMap& ranks = ranks_;
  at::Tensor in = input;
  at::Tensor out = output;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {out},
                 [in, out, e, op, &ranks](agent::Worker& w) {
                   at::Tensor send = ranks.identity() ? in : pack(blocks(in, ranks.size()), ranks);
                   return w.reduce_scatter(send.data_ptr(), out.data_ptr(), e.count, e.dtype, op);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  check_dense_cpu(input, "all_to_all input");
  check_dense_cpu(output, "all_to_all output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel(),
              "tributary: all_to_all output must be like its input");
  TORCH_CHECK(input.dim() > 0 && input.size(0) % size_ == 0, "tributary: all_to_all of ",
              input.sizes(), " does not split into ", size_, " equal blocks");
  for (const auto* splits : {&output_split_sizes, &input_split_sizes}) {
    for (std::int64_t s : *splits) {
      TORCH_CHECK(s == input.size(0) / size_,
                  "tributary: all_to_all with uneven split sizes is not supported");
    }
  }
  const RankMap& ranks = ranks_;
  at::Tensor in = input;
  at::Tensor out = output;
  return enqueue(c10d::OpType::ALLTOALL_BASE, {out}, [in, out, &ranks](agent::Worker& w) {
    const Elements e = elements(in.reshape({ranks.size(), -1})[0]);
    if (ranks.identity()) return w.all_to_all(in.data_ptr(), out.data_ptr(), e.count, e.dtype);
    at::Tensor send = pack(blocks(in, ranks.size()), ranks);
    at::Tensor recv = at::empty_like(send);
    auto r = w.all_to_all(send.data_ptr(), recv.data_ptr(), e.count, e.dtype);
    std::vector<at::Tensor> by_torch_rank = blocks(out, ranks.size());
    if (r) unpack(recv, by_torch_rank, ranks);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::alltoall(std::vector<at::Tensor>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllToAllOptions&) {
  TORCH_CHECK(!inputs.empty(), "tributary: all_to_all needs one input per rank");
  std::vector<std::vector<at::Tensor>> in_lists{inputs};
  std::vector<std::vector<at::Tensor>> out_lists{outputs};
  std::vector<at::Tensor> in = per_rank(in_lists, size_, inputs[0], "all_to_all inputs");
  std::vector<at::Tensor> out = per_rank(out_lists, size_, inputs[0], "all_to_all outputs");
  const Elements e = elements(in[0]);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::ALLTOALL, out, [in, out, e, &ranks](agent::Worker& w) mutable {
    at::Tensor send = pack(in, ranks);
    at::Tensor recv = at::empty_like(send);
    auto r = w.all_to_all(send.data_ptr(), recv.data_ptr(), e.count, e.dtype);
    if (r) unpack(recv, out, ranks);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTributary::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, {}, [](agent::Worker& w) { return w.barrier(); });
}

Result<c10::intrusive_ptr<ProcessGroupTributary>> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, agent::WorkerConfig config) {
  if (g_live_groups.load() > 0) {
    return error(StatusCode::kInvalidArgument,
                 "one tributary process group per process (the default group); subgroups "
                 "(dist.new_group) are not supported");
  }
  // No quorum wait: a group that lost a member fails its next collective (enqueue's
  // contributor check) instead of waiting for a replacement, and at the end, when the members
  // leave one by one, one still finishing its last collective resolves it with the fewer
  // members left (the commit rule keeps what the others committed) rather than wait forever
  // for a quorum that has gone home.
  config.min_world_size = 1;
  TRIB_ASSIGN_OR_RETURN(std::unique_ptr<agent::Worker> worker, agent::Worker::start(config));
  if (worker->size() != size) {
    return error(StatusCode::kMismatch,
                 "the cluster at " + config.coordinator + " has " + std::to_string(worker->size()) +
                     " members but torch.distributed expects " + std::to_string(size) +
                     " (start the coordinator with --world-size " + std::to_string(size) + ")");
  }
  const std::string mine = std::to_string(worker->rank());
  store->set("tributary/worker_rank/" + std::to_string(rank),
             std::vector<std::uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> keys;
  for (int t = 0; t < size; ++t) keys.push_back("tributary/worker_rank/" + std::to_string(t));
  store->wait(keys, config.join_timeout);
  std::vector<int> worker_rank_of;
  for (const std::string& key : keys) {
    const std::vector<std::uint8_t> v = store->get(key);
    worker_rank_of.push_back(std::stoi(std::string(v.begin(), v.end())));
  }
  TRIB_ASSIGN_OR_RETURN(RankMap ranks, RankMap::from_worker_ranks(std::move(worker_rank_of)));
  ++g_live_groups;
  return c10::make_intrusive<ProcessGroupTributary>(rank, size, std::move(worker), std::move(ranks),
                                                    timeout);
}

}  // namespace tributary::python::torch_backend

PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

PYBIND11_MODULE(_c10d, m) {
  namespace py = pybind11;
  using tributary::python::torch_backend::create_process_group;
  m.doc() = "The tributary torch.distributed backend (registered by tributary.torch)";
  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& coordinator,
         const std::string& secret, const std::string& bind_host, const std::string& host,
         std::int64_t join_timeout_ms) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        tributary::agent::WorkerConfig config;
        config.coordinator = coordinator;
        config.secret = secret;
        config.bind_host = bind_host;
        config.host = host;
        config.join_timeout = std::chrono::milliseconds(join_timeout_ms);
        tributary::Result<
            c10::intrusive_ptr<tributary::python::torch_backend::ProcessGroupTributary>>
            group = tributary::error(tributary::StatusCode::kInternal, "not started");
        {
          py::gil_scoped_release release;
          group = create_process_group(store, rank, size, timeout, config);
        }
        if (!group) throw std::runtime_error("tributary: " + group.status().to_string());
        return *group;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("coordinator"), py::arg("secret"), py::arg("bind_host"), py::arg("host"),
      py::arg("join_timeout_ms"));
}
