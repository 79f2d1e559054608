// The operations of the "tributary" backend (backend.h): each checks its tensors at the call
// (bad input raises before anything is queued), stages CUDA tensors into pinned host twins
// (torch_staging.h: the job below only ever sees host tensors), lays them out for the Worker
// (torch's rank order to the coordinator's, lists into flat buffers) and queues one job.
// Point-to-point messages are in point_to_point_ops.cc.
#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "python/torch_backend/backend.h"
#include "python/torch_backend/tensor_checks.h"

namespace tributary::python::torch_backend {
namespace {

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

// Bool tensors reduce as bytes (torch stores false / true as 0 / 1): reduce_op() maps their
// operations onto MIN and MAX, which keep every byte 0 or 1.
Elements reduction_elements(const at::Tensor& t) {
  if (t.scalar_type() == c10::ScalarType::Bool) {
    return {DType::kUInt8, static_cast<std::size_t>(t.numel())};
  }
  auto d = dtype_of(t.scalar_type());
  TORCH_CHECK(d.has_value(), "tributary: cannot reduce ", t.scalar_type(),
              " tensors; reductions take float32, float64, float16, bfloat16, int8, uint8, "
              "int32, int64, bool");
  return {*d, static_cast<std::size_t>(t.numel())};
}

// The operation on tensors of dtype `s`. Bool, as torch (and gloo) compute it: SUM and MAX
// are "any" (true + true is true), PRODUCT and MIN "all"; AVG has no bool result.
ReduceOp reduce_op(const c10d::ReduceOp& op, c10::ScalarType s) {
  if (s == c10::ScalarType::Bool) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX: return ReduceOp::kMax;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN: return ReduceOp::kMin;
      default:
        TORCH_CHECK(false, "tributary: reduction op ", static_cast<int>(op.op_),
                    " is not supported on Bool tensors (SUM, PRODUCT, MIN, MAX; all_reduce: "
                    "BAND, BOR, BXOR)");
    }
  }
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProd;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    default:
      TORCH_CHECK(false, "tributary: reduction op ", static_cast<int>(op.op_),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX; all_reduce of integer or "
                  "bool tensors: BAND, BOR, BXOR)");
  }
}

// `list` holds one tensor per rank, each like `like` (dtype, element count).
std::vector<at::Tensor> per_rank(const std::vector<at::Tensor>& list, int size,
                                 const at::Tensor& like, const char* what) {
  TORCH_CHECK(static_cast<int>(list.size()) == size, "tributary: ", what, ": ", list.size(),
              " tensors for a group of ", size);
  for (const at::Tensor& t : list) {
    check_dense(t, what);
    TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(),
                "tributary: ", what, ": every tensor must be ", like.scalar_type(), " with ",
                like.numel(), " elements, got ", t.scalar_type(), " with ", t.numel());
  }
  return list;
}

std::vector<at::Tensor>& one_list(std::vector<std::vector<at::Tensor>>& lists, const char* what) {
  TORCH_CHECK(lists.size() == 1, "tributary: ", what, ": one tensor list per process, got ",
              lists.size());
  return lists[0];
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

// Tensors as one flat byte buffer (their bytes end to end), and back.
at::Tensor flat_bytes(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> views;
  for (const at::Tensor& t : tensors) views.push_back(t.reshape({-1}).view(at::kByte));
  return views.empty() ? at::empty({0}, at::kByte) : at::cat(views);
}

void scatter_bytes(const at::Tensor& flat, std::vector<at::Tensor>& tensors) {
  std::int64_t offset = 0;
  for (at::Tensor& t : tensors) {
    const auto n = static_cast<std::int64_t>(t.nbytes());
    t.reshape({-1}).view(at::kByte).copy_(flat.narrow(0, offset, n));
    offset += n;
  }
}

// The all-reduce of `t` (dense, contiguous) in place.
Result<agent::Outcome> all_reduce_in_place(agent::Worker& w, const at::Tensor& t, ReduceOp op) {
  const Elements e = reduction_elements(t);
  return w.all_reduce(t.data_ptr(), t.data_ptr(), e.count, e.dtype, op);
}

// An all_to_all_v of byte blocks given in torch's rank order (counts and offsets in bytes):
// the Worker's blocks go by its ranks, so each list is read through the rank map (no copy:
// the offsets say where each torch rank's block is).
Result<agent::Outcome> all_to_all_bytes(agent::Worker& w, const void* send,
                                        const std::vector<std::size_t>& send_counts,
                                        const std::vector<std::size_t>& send_offsets, void* recv,
                                        const std::vector<std::size_t>& recv_counts,
                                        const std::vector<std::size_t>& recv_offsets,
                                        const RankMap& ranks) {
  const int n = ranks.size();
  std::vector<std::size_t> sc(n), so(n), rc(n), ro(n);
  for (int wr = 0; wr < n; ++wr) {
    const int t = ranks.torch_rank(wr);
    sc[wr] = send_counts[t];
    so[wr] = send_offsets[t];
    rc[wr] = recv_counts[t];
    ro[wr] = recv_offsets[t];
  }
  return w.all_to_all_v(send, sc, so, recv, rc, ro, DType::kUInt8);
}

std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> offsets(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

// Rows per rank for all_to_all_single: the given splits, or dim 0 split evenly.
std::vector<std::size_t> row_splits(const std::vector<int64_t>& splits, const at::Tensor& t,
                                    int size, const char* what) {
  const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  std::vector<std::size_t> out;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "tributary: all_to_all ", what, " of ", t.sizes(),
                " does not split into ", size, " equal blocks; pass split sizes");
    out.assign(static_cast<std::size_t>(size), static_cast<std::size_t>(rows / size));
    return out;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "tributary: all_to_all ", what, ": ",
              splits.size(), " split sizes for a group of ", size);
  std::int64_t sum = 0;
  for (std::int64_t s : splits) {
    TORCH_CHECK(s >= 0, "tributary: all_to_all ", what, ": negative split size ", s);
    sum += s;
    out.push_back(static_cast<std::size_t>(s));
  }
  TORCH_CHECK(sum == rows, "tributary: all_to_all ", what, " split sizes add up to ", sum,
              " but the tensor has ", rows, " rows");
  return out;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TributaryBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast tensor");
  const int root = worker_root(opts.rootRank);
  const Elements e = elements(t);
  TensorStaging staging({t}, "broadcast");
  at::Tensor h = staging.read_write(t);
  return enqueue(c10d::OpType::BROADCAST, {t}, staging.seal(), [h, e, root](agent::Worker& w) {
    return w.broadcast(h.data_ptr(), h.data_ptr(), e.count, e.dtype, root);
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "tributary: all_reduce: one tensor per process, got ",
              tensors.size());
  if (tensors[0].layout() == c10::kSparse) {
    TORCH_CHECK(tensors[0].device().is_cpu(), "tributary: sparse all_reduce takes CPU tensors, "
                "got a ", tensors[0].device(), " one");
    return allreduce_sparse_coo(tensors[0], opts.reduceOp);
  }
  at::Tensor t = single(tensors, "all_reduce tensor");
  const auto kind = opts.reduceOp.op_;
  if (kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR || kind == c10d::ReduceOp::BXOR) {
    return allreduce_bitwise(t, opts.reduceOp);
  }
  (void)reduction_elements(t);
  const ReduceOp op = reduce_op(opts.reduceOp, t.scalar_type());
  TensorStaging staging({t}, "all_reduce");
  at::Tensor h = staging.read_write(t);
  return enqueue(c10d::OpType::ALLREDUCE, {t}, staging.seal(),
                 [h, op](agent::Worker& w) { return all_reduce_in_place(w, h, op); });
}

// BAND, BOR, BXOR of integer or bool tensors (gloo's): rare (flags, masks), so not a
// reduction of the Worker's: every member's tensor is gathered and folded locally (exact, in
// any order), which costs N times the tensor in memory and on the wire.
c10::intrusive_ptr<c10d::Work> TributaryBackend::allreduce_bitwise(const at::Tensor& t,
                                                                   const c10d::ReduceOp& rop) {
  const c10::ScalarType s = t.scalar_type();
  TORCH_CHECK(at::isIntegralType(s, /*includeBool=*/true), "tributary: reduction op ",
              static_cast<int>(rop.op_), " (bitwise) takes integer or bool tensors, got ", s);
  const auto kind = rop.op_;
  const Elements e = elements(t);
  TensorStaging staging({t}, "all_reduce");
  at::Tensor h = staging.read_write(t);
  const int n = size_;
  return enqueue(c10d::OpType::ALLREDUCE, {t}, staging.seal(), [h, e, n, kind](agent::Worker& w) {
    at::Tensor all = at::empty({n, h.numel()}, h.options());
    auto r = w.all_gather(h.data_ptr(), all.data_ptr(), e.count, e.dtype);
    if (!r) return r;
    at::Tensor acc = all[0].clone();
    for (int i = 1; i < n; ++i) {
      if (kind == c10d::ReduceOp::BAND) {
        acc.bitwise_and_(all[i]);
      } else if (kind == c10d::ReduceOp::BOR) {
        acc.bitwise_or_(all[i]);
      } else {
        acc.bitwise_xor_(all[i]);
      }
    }
    h.reshape({-1}).copy_(acc);
    return r;
  });
}

// As gloo does it: every member's (coalesced) indices and values are gathered, padded to the
// largest count, and summed in torch's rank order, so every member holds the same bits.
c10::intrusive_ptr<c10d::Work> TributaryBackend::allreduce_sparse_coo(const at::Tensor& input,
                                                                      const c10d::ReduceOp& rop) {
  TORCH_CHECK(input.scalar_type() != c10::ScalarType::Bool,
              "tributary: sparse all_reduce of Bool tensors is not supported");
  const ReduceOp op = reduce_op(rop, input.scalar_type());
  TORCH_CHECK(op == ReduceOp::kSum || op == ReduceOp::kAvg,
              "tributary: sparse all_reduce takes SUM or AVG");
  (void)reduction_elements(input);
  at::Tensor t = input;
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::ALLREDUCE, {t}, {}, [t, op, &ranks](agent::Worker& w) mutable {
    const int n = ranks.size();
    at::Tensor mine = t.coalesce();
    at::Tensor indices = mine._indices().contiguous();  // [sparse_dim, nnz], int64
    at::Tensor values = mine._values().contiguous();    // [nnz, dense...]
    std::int64_t nnz = mine._nnz();
    at::Tensor counts = at::empty({n}, at::kLong);
    auto r = w.all_gather(&nnz, counts.data_ptr(), 1, DType::kInt64);
    if (!r) return r;
    const std::int64_t most = counts.max().item<std::int64_t>();
    std::vector<std::int64_t> index_shape = {indices.size(0), most};
    at::Tensor my_indices = at::zeros(index_shape, indices.options());
    my_indices.narrow(1, 0, nnz).copy_(indices);
    std::vector<std::int64_t> value_shape = values.sizes().vec();
    value_shape[0] = most;
    at::Tensor my_values = at::zeros(value_shape, values.options());
    my_values.narrow(0, 0, nnz).copy_(values);
    index_shape.insert(index_shape.begin(), n);
    value_shape.insert(value_shape.begin(), n);
    at::Tensor all_indices = at::empty(index_shape, indices.options());
    at::Tensor all_values = at::empty(value_shape, values.options());
    r = w.all_gather(my_indices.data_ptr(), all_indices.data_ptr(),
                     static_cast<std::size_t>(my_indices.numel()), DType::kInt64);
    if (!r) return r;
    r = w.all_gather(my_values.data_ptr(), all_values.data_ptr(), my_values.nbytes(), DType::kUInt8);
    if (!r) return r;
    std::vector<at::Tensor> idx;
    std::vector<at::Tensor> val;
    for (int tr = 0; tr < n; ++tr) {
      const int wr = ranks.worker_rank(tr);
      const std::int64_t k = counts[wr].item<std::int64_t>();
      idx.push_back(all_indices[wr].narrow(1, 0, k));
      val.push_back(all_values[wr].narrow(0, 0, k));
    }
    at::Tensor sum =
        at::sparse_coo_tensor(at::cat(idx, 1), at::cat(val, 0), t.sizes(), t.options()).coalesce();
    if (op == ReduceOp::kAvg) sum = sum / n;
    t.copy_(sum);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "tributary: all_reduce_coalesced of no tensors");
  for (const at::Tensor& t : tensors) {
    check_dense(t, "all_reduce_coalesced tensor");
    (void)reduction_elements(t);
  }
  std::map<c10::ScalarType, ReduceOp> ops;
  for (const at::Tensor& t : tensors)
    ops[t.scalar_type()] = reduce_op(opts.reduceOp, t.scalar_type());
  TensorStaging staging(tensors, "all_reduce_coalesced");
  std::vector<at::Tensor> list = staging.read_write(tensors);
  // One all-reduce per dtype, over the tensors of that dtype end to end.
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors, staging.seal(),
                 [list, ops](agent::Worker& w) mutable {
                   std::map<c10::ScalarType, std::vector<at::Tensor>> by_dtype;
                   for (const at::Tensor& t : list) by_dtype[t.scalar_type()].push_back(t);
                   Result<agent::Outcome> r = error(StatusCode::kInternal, "no tensors");
                   for (auto& [dtype, group] : by_dtype) {
                     const ReduceOp op = ops.at(dtype);
                     std::vector<at::Tensor> flat_views;
                     for (const at::Tensor& t : group) flat_views.push_back(t.reshape({-1}));
                     at::Tensor flat = at::cat(flat_views);
                     r = all_reduce_in_place(w, flat, op);
                     if (!r) return r;
                     std::int64_t offset = 0;
                     for (at::Tensor& t : group) {
                       t.reshape({-1}).copy_(flat.narrow(0, offset, t.numel()));
                       offset += t.numel();
                     }
                   }
                   return r;
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors, "reduce tensor");
  const Elements e = reduction_elements(t);
  const ReduceOp op = reduce_op(opts.reduceOp, t.scalar_type());
  const int root = worker_root(opts.rootRank);
  TensorStaging staging({t}, "reduce");
  at::Tensor h = staging.read_write(t);
  return enqueue(c10d::OpType::REDUCE, {t}, staging.seal(), [h, e, op, root](agent::Worker& w) {
    return w.reduce(h.data_ptr(), h.data_ptr(), e.count, e.dtype, op, root);
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  at::Tensor in = single(inputs, "all_gather input");
  const std::vector<at::Tensor> outs = per_rank(one_list(outputs, "all_gather outputs"), size_,
                                                in, "all_gather outputs");
  const Elements e = elements(in);
  const RankMap& ranks = ranks_;
  std::vector<at::Tensor> all = outs;
  all.push_back(in);
  TensorStaging staging(all, "all_gather");
  in = staging.read(in);
  std::vector<at::Tensor> out = staging.write(outs);
  return enqueue(c10d::OpType::ALLGATHER, outs, staging.seal(),
                 [in, out, e, &ranks](agent::Worker& w) mutable {
    at::Tensor flat = at::empty({in.numel() * ranks.size()}, in.options());
    auto r = w.all_gather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype);
    if (r) unpack(flat, out, ranks);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::_allgather_base(at::Tensor& output,
                                                                 at::Tensor& input,
                                                                 const c10d::AllgatherOptions&) {
  check_dense(input, "all_gather input");
  check_dense(output, "all_gather output");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "tributary: all_gather output must hold ", size_, " x ", input.numel(), " ",
      input.scalar_type(), " elements, got ", output.numel(), " ", output.scalar_type());
  const Elements e = elements(input);
  const RankMap& ranks = ranks_;
  TensorStaging staging({input, output}, "all_gather_into_tensor");
  at::Tensor in = staging.read(input);
  at::Tensor out = staging.write(output);
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, staging.seal(),
                 [in, out, e, &ranks](agent::Worker& w) {
    if (ranks.identity()) return w.all_gather(in.data_ptr(), out.data_ptr(), e.count, e.dtype);
    at::Tensor flat = at::empty_like(out);
    auto r = w.all_gather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype);
    std::vector<at::Tensor> by_torch_rank = blocks(out, ranks.size());
    if (r) unpack(flat, by_torch_rank, ranks);
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), "tributary: all_gather_coalesced: ",
              outputs.size(), " output lists for ", inputs.size(), " inputs");
  std::vector<at::Tensor> all_outputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_dense(inputs[i], "all_gather_coalesced input");
    for (const at::Tensor& o :
         per_rank(outputs[i], size_, inputs[i], "all_gather_coalesced outputs")) {
      all_outputs.push_back(o);
    }
  }
  std::vector<at::Tensor> all = all_outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  TensorStaging staging(all, "all_gather_coalesced");
  std::vector<at::Tensor> in = staging.read(inputs);
  std::vector<std::vector<at::Tensor>> out;
  for (const auto& list : outputs) out.push_back(staging.write(list));
  const RankMap& ranks = ranks_;
  // The inputs end to end as bytes, gathered once; member r's block holds its inputs in order.
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, all_outputs, staging.seal(),
                 [in, out, &ranks](agent::Worker& w) mutable {
                   at::Tensor mine = flat_bytes(in);
                   const int n = ranks.size();
                   at::Tensor all = at::empty({mine.numel() * n}, at::kByte);
                   auto r = w.all_gather(mine.data_ptr(), all.data_ptr(),
                                         static_cast<std::size_t>(mine.numel()), DType::kUInt8);
                   if (!r) return r;
                   std::vector<at::Tensor> from = blocks(all, n);
                   for (int t = 0; t < n; ++t) {
                     std::vector<at::Tensor> targets;
                     for (auto& list : out) targets.push_back(list[t]);
                     scatter_bytes(from[ranks.worker_rank(t)], targets);
                   }
                   return r;
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), "tributary: all_gather_into_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_dense(inputs[i], "all_gather_into_tensor input");
    check_dense(outputs[i], "all_gather_into_tensor output");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                    outputs[i].numel() == inputs[i].numel() * size_,
                "tributary: all_gather_into_tensor output ", i, " must hold ", size_, " x ",
                inputs[i].numel(), " ", inputs[i].scalar_type(), " elements");
  }
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  TensorStaging staging(all, "all_gather_into_tensor_coalesced");
  std::vector<at::Tensor> in = staging.read(inputs);
  std::vector<at::Tensor> out = staging.write(outputs);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::COALESCED, outputs, staging.seal(),
                 [in, out, &ranks](agent::Worker& w) {
    Result<agent::Outcome> r = error(StatusCode::kInternal, "no tensors");
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Elements e = elements(in[i]);
      at::Tensor flat = ranks.identity() ? out[i] : at::empty_like(out[i]);
      r = w.all_gather(in[i].data_ptr(), flat.data_ptr(), e.count, e.dtype);
      if (!r) return r;
      if (!ranks.identity()) {
        std::vector<at::Tensor> by_torch_rank = blocks(out[i], ranks.size());
        unpack(flat, by_torch_rank, ranks);
      }
    }
    return r;
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs, "gather input");
  const int root = worker_root(opts.rootRank);
  const bool is_root = opts.rootRank == rank_;
  std::vector<at::Tensor> outs;
  if (is_root) {
    outs = per_rank(one_list(outputs, "gather outputs (on the root)"), size_, in,
                    "gather outputs (on the root)");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "tributary: gather outputs are given on the root only");
  }
  const Elements e = elements(in);
  const RankMap& ranks = ranks_;
  std::vector<at::Tensor> all = outs;
  all.push_back(in);
  TensorStaging staging(all, "gather");
  in = staging.read(in);
  std::vector<at::Tensor> out = staging.write(outs);
  return enqueue(c10d::OpType::GATHER, outs, staging.seal(),
                 [in, out, e, root, is_root, &ranks](agent::Worker& w) mutable {
                   if (!is_root) return w.gather(in.data_ptr(), nullptr, e.count, e.dtype, root);
                   at::Tensor flat = at::empty({in.numel() * ranks.size()}, in.options());
                   auto r = w.gather(in.data_ptr(), flat.data_ptr(), e.count, e.dtype, root);
                   if (r) unpack(flat, out, ranks);
                   return r;
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter output");
  const int root = worker_root(opts.rootRank);
  const bool is_root = opts.rootRank == rank_;
  std::vector<at::Tensor> in;
  if (is_root) {
    in = per_rank(one_list(inputs, "scatter inputs (on the root)"), size_, out,
                  "scatter inputs (on the root)");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "tributary: scatter inputs are given on the root only");
  }
  const Elements e = elements(out);
  const RankMap& ranks = ranks_;
  std::vector<at::Tensor> all = in;
  all.push_back(out);
  TensorStaging staging(all, "scatter");
  in = staging.read(in);
  at::Tensor out_device = out;
  out = staging.write(out);
  return enqueue(c10d::OpType::SCATTER, {out_device}, staging.seal(),
                 [in, out, e, root, is_root, &ranks](agent::Worker& w) {
                   if (!is_root) return w.scatter(nullptr, out.data_ptr(), e.count, e.dtype, root);
                   at::Tensor flat = pack(in, ranks);
                   return w.scatter(flat.data_ptr(), out.data_ptr(), e.count, e.dtype, root);
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter output");
  std::vector<at::Tensor> in = per_rank(one_list(inputs, "reduce_scatter inputs"), size_, out,
                                        "reduce_scatter inputs");
  const Elements e = reduction_elements(out);
  const ReduceOp op = reduce_op(opts.reduceOp, out.scalar_type());
  const RankMap& ranks = ranks_;
  std::vector<at::Tensor> all = in;
  all.push_back(out);
  TensorStaging staging(all, "reduce_scatter");
  in = staging.read(in);
  at::Tensor out_device = out;
  out = staging.write(out);
  return enqueue(c10d::OpType::REDUCE_SCATTER, {out_device}, staging.seal(),
                 [in, out, e, op, &ranks](agent::Worker& w) {
    at::Tensor flat = pack(in, ranks);
    return w.reduce_scatter(flat.data_ptr(), out.data_ptr(), e.count, e.dtype, op);
  });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_dense(input, "reduce_scatter input");
  check_dense(output, "reduce_scatter output");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
      "tributary: reduce_scatter input must hold ", size_, " x ", output.numel(), " ",
      output.scalar_type(), " elements, got ", input.numel(), " ", input.scalar_type());
  const Elements e = reduction_elements(output);
  const ReduceOp op = reduce_op(opts.reduceOp, output.scalar_type());
  const RankMap& ranks = ranks_;
  TensorStaging staging({input, output}, "reduce_scatter_tensor");
  at::Tensor in = staging.read(input);
  at::Tensor out = staging.write(output);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, staging.seal(),
                 [in, out, e, op, &ranks](agent::Worker& w) {
                   at::Tensor send = ranks.identity() ? in : pack(blocks(in, ranks.size()), ranks);
                   return w.reduce_scatter(send.data_ptr(), out.data_ptr(), e.count, e.dtype, op);
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "tributary: reduce_scatter_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_dense(inputs[i], "reduce_scatter_tensor input");
    check_dense(outputs[i], "reduce_scatter_tensor output");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                    inputs[i].numel() == outputs[i].numel() * size_,
                "tributary: reduce_scatter_tensor input ", i, " must hold ", size_, " x ",
                outputs[i].numel(), " ", outputs[i].scalar_type(), " elements");
    (void)reduction_elements(outputs[i]);
  }
  std::vector<ReduceOp> ops;
  for (const at::Tensor& t : outputs) ops.push_back(reduce_op(opts.reduceOp, t.scalar_type()));
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  TensorStaging staging(all, "reduce_scatter_tensor_coalesced");
  std::vector<at::Tensor> in = staging.read(inputs);
  std::vector<at::Tensor> out = staging.write(outputs);
  const RankMap& ranks = ranks_;
  return enqueue(
      c10d::OpType::COALESCED, outputs, staging.seal(), [in, out, ops, &ranks](agent::Worker& w) {
        Result<agent::Outcome> r = error(StatusCode::kInternal, "no tensors");
        for (std::size_t i = 0; i < in.size(); ++i) {
          const Elements e = reduction_elements(out[i]);
          const ReduceOp op = ops[i];
          at::Tensor send = ranks.identity() ? in[i] : pack(blocks(in[i], ranks.size()), ranks);
          r = w.reduce_scatter(send.data_ptr(), out[i].data_ptr(), e.count, e.dtype, op);
          if (!r) return r;
        }
        return r;
      });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  check_dense(input, "all_to_all input");
  check_dense(output, "all_to_all output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tributary: all_to_all output is ",
              output.scalar_type(), " but its input is ", input.scalar_type());
  const std::vector<std::size_t> in_rows = row_splits(input_split_sizes, input, size_, "input");
  const std::vector<std::size_t> out_rows = row_splits(output_split_sizes, output, size_, "output");
  // Bytes per row: the same on both sides (a row is what dim 0 indexes).
  const auto row_bytes = [](const at::Tensor& t) {
    const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    return rows == 0 ? std::size_t{0} : t.nbytes() / static_cast<std::size_t>(rows);
  };
  const std::size_t in_row = row_bytes(input);
  const std::size_t out_row = row_bytes(output);
  TORCH_CHECK(in_row == out_row || input.numel() == 0 || output.numel() == 0,
              "tributary: all_to_all input rows of ", input.sizes(), " and output rows of ",
              output.sizes(), " differ in size");
  const std::size_t row = std::max(in_row, out_row);
  std::vector<std::size_t> send_counts;
  std::vector<std::size_t> recv_counts;
  for (std::size_t c : in_rows) send_counts.push_back(c * row);
  for (std::size_t c : out_rows) recv_counts.push_back(c * row);
  TensorStaging staging({input, output}, "all_to_all_single");
  at::Tensor in = staging.read(input);
  at::Tensor out = staging.write(output);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, staging.seal(),
                 [in, out, send_counts, recv_counts, &ranks](agent::Worker& w) {
                   return all_to_all_bytes(w, in.data_ptr(), send_counts, offsets_of(send_counts),
                                           out.data_ptr(), recv_counts, offsets_of(recv_counts),
                                           ranks);
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "tributary: all_to_all needs one input and one output per rank of the group of ",
              size_, ", got ", inputs.size(), " and ", outputs.size());
  std::vector<std::size_t> send_counts;
  std::vector<std::size_t> recv_counts;
  for (int r = 0; r < size_; ++r) {
    check_dense(inputs[r], "all_to_all input");
    check_dense(outputs[r], "all_to_all output");
    TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                    outputs[r].scalar_type() == inputs[0].scalar_type(),
                "tributary: all_to_all tensors must share one dtype");
    send_counts.push_back(inputs[r].nbytes());
    recv_counts.push_back(outputs[r].nbytes());
  }
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  TensorStaging staging(all, "all_to_all");
  std::vector<at::Tensor> in = staging.read(inputs);
  std::vector<at::Tensor> out = staging.write(outputs);
  const RankMap& ranks = ranks_;
  return enqueue(c10d::OpType::ALLTOALL, outputs, staging.seal(),
                 [in, out, send_counts, recv_counts, &ranks](agent::Worker& w) mutable {
                   at::Tensor send = flat_bytes(in);
                   at::Tensor recv = at::empty(
                       {static_cast<std::int64_t>(std::accumulate(recv_counts.begin(),
                                                                  recv_counts.end(),
                                                                  std::size_t{0}))},
                       at::kByte);
                   auto r = all_to_all_bytes(w, send.data_ptr(), send_counts,
                                             offsets_of(send_counts), recv.data_ptr(),
                                             recv_counts, offsets_of(recv_counts), ranks);
                   if (r) scatter_bytes(recv, out);
                   return r;
                 });
}

c10::intrusive_ptr<c10d::Work> TributaryBackend::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, {}, {}, [](agent::Worker& w) { return w.barrier(); });
}

}  // namespace tributary::python::torch_backend
