// The nccl-tests method: per size, warm-up iterations, a barrier, then timed iterations;
// time per iteration averaged over the timed ones, max over ranks; a check pass counts
// wrong elements (inputs are small integers, so every dtype's sum is exact).
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "cli/run_collective.h"
#include "cli/typed_buffer.h"
#include "cli/workloads.h"
#include "core/reduce.h"

namespace tributary::cli {
namespace {

// Expected receive buffer of `rank` for the check pass.
TypedBuffer expected_result(CollectiveKind kind, const BufferShape& s, DType dtype, ReduceOp op,
                            int rank, int n, int root) {
  TypedBuffer out(dtype, s.recv_count);
  auto reduced = [&](std::size_t i) {
    double acc = op == ReduceOp::kMax ? check_value(0, i) : 0.0;
    for (int q = 0; q < n; ++q) {
      const double v = check_value(q, i);
      acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
    }
    return acc;
  };
  const std::size_t b = s.per_rank;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduce:
      for (std::size_t i = 0; i < s.recv_count; ++i) out.set(i, reduced(i));
      break;
    case CollectiveKind::kReduceScatter:
      for (std::size_t j = 0; j < b; ++j) out.set(j, reduced(rank * b + j));
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kGather:
      for (int q = 0; q < n; ++q)
        for (std::size_t j = 0; j < b; ++j) out.set(q * b + j, check_value(q, j));
      break;
    case CollectiveKind::kBroadcast:
      for (std::size_t i = 0; i < s.recv_count; ++i) out.set(i, check_value(root, i));
      break;
    case CollectiveKind::kScatter:
      for (std::size_t j = 0; j < b; ++j) out.set(j, check_value(root, rank * b + j));
      break;
    case CollectiveKind::kAllToAll:
      for (int q = 0; q < n; ++q)
        for (std::size_t j = 0; j < b; ++j) out.set(q * b + j, check_value(q, rank * b + j));
      break;
    case CollectiveKind::kBarrier: break;
  }
  if (op == ReduceOp::kAvg &&
      (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduce ||
       kind == CollectiveKind::kReduceScatter)) {
    scale_by_count(out.data(), out.count(), dtype, n);
  }
  return out;
}

bool result_is_defined_here(CollectiveKind kind, int rank, int root) {
  return !((kind == CollectiveKind::kReduce || kind == CollectiveKind::kGather) && rank != root);
}

TypedBuffer make_input(DType dtype, std::size_t count, int rank) {
  TypedBuffer in(dtype, count);
  for (std::size_t i = 0; i < count; ++i) in.set(i, check_value(rank, i));
  return in;
}

std::size_t count_wrong(const TypedBuffer& got, const TypedBuffer& want) {
  const std::size_t es = dtype_size(got.dtype());
  const auto* a = static_cast<const unsigned char*>(got.data());
  const auto* b = static_cast<const unsigned char*>(want.data());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < want.count(); ++i)
    wrong += std::memcmp(a + i * es, b + i * es, es) != 0;
  return wrong;
}

}  // namespace

double check_value(int rank, std::size_t i) {
  return static_cast<double>((static_cast<std::size_t>(rank) * 7 + i * 3) % 11 + 1);
}

Status run_bench(agent::Worker& w, const BenchSpec& spec, std::FILE* out) {
  const int n = w.size();
  const int rank = w.rank();
  const std::size_t es = dtype_size(spec.dtype);
  if (rank == 0) {
    std::fprintf(out, "# tributary np=%d dtype=%s op=%s warmup=%d iters=%d\n", n,
                 std::string(to_string(spec.dtype)).c_str(),
                 std::string(to_string(spec.op)).c_str(), spec.warmup, spec.iters);
    // model_us: the cost model's prediction for the all-reduce's algorithm (docs/
    // algorithms.md), beside what was measured; "-" for the other collectives.
    std::fprintf(out, "#%12s %12s %8s %7s %15s %11s %12s %12s %7s %10s\n", "size", "count",
                 "type", "redop", "algo", "time_us", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
                 "model_us");
    std::fflush(out);
  }
  for (CollectiveKind kind : spec.kinds) {
    for (std::size_t bytes = spec.min_bytes; bytes <= spec.max_bytes;
         bytes = std::max(bytes + 1, static_cast<std::size_t>(bytes * spec.factor))) {
      const std::size_t total = kind == CollectiveKind::kBarrier ? 0 : bytes / es;
      const BufferShape shape = buffer_shape(kind, total, n);
      TypedBuffer send = make_input(spec.dtype, shape.send_count, rank);
      TypedBuffer recv(spec.dtype, shape.recv_count);
      agent::Outcome last;
      for (int i = 0; i < spec.warmup; ++i) {
        TRIB_RETURN_IF_ERROR(
            run_collective(w, kind, send.data(), recv.data(), shape, spec.dtype, spec.op, spec.root)
                .status());
      }
      TRIB_RETURN_IF_ERROR(w.barrier().status());
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < spec.iters; ++i) {
        TRIB_ASSIGN_OR_RETURN(last, run_collective(w, kind, send.data(), recv.data(), shape,
                                                   spec.dtype, spec.op, spec.root));
      }
      const auto t1 = std::chrono::steady_clock::now();
      double seconds = std::chrono::duration<double>(t1 - t0).count() / std::max(1, spec.iters);
      TRIB_RETURN_IF_ERROR(
          w.all_reduce(&seconds, &seconds, 1, DType::kFloat64, ReduceOp::kMax).status());
      double wrong = 0;
      if (spec.check && kind != CollectiveKind::kBarrier) {
        TypedBuffer fresh(spec.dtype, shape.recv_count);
        TRIB_RETURN_IF_ERROR(run_collective(w, kind, send.data(), fresh.data(), shape, spec.dtype,
                                            spec.op, spec.root)
                                 .status());
        if (result_is_defined_here(kind, rank, spec.root)) {
          wrong = static_cast<double>(count_wrong(
              fresh, expected_result(kind, shape, spec.dtype, spec.op, rank, n, spec.root)));
        }
      }
      TRIB_RETURN_IF_ERROR(
          w.all_reduce(&wrong, &wrong, 1, DType::kFloat64, ReduceOp::kSum).status());
      if (rank == 0) {
        const double moved = static_cast<double>(std::max(shape.send_count, shape.recv_count) * es);
        const double algbw = seconds > 0 ? moved / seconds / 1e9 : 0.0;
        const std::string algo = kind == CollectiveKind::kAllReduce
                                     ? std::string(to_string(last.algorithm))
                                     : std::string(to_string(kind));
        char model[32] = "-";
        if (kind == CollectiveKind::kAllReduce) {
          std::snprintf(model, sizeof model, "%.2f",
                        w.predicted_all_reduce_seconds(static_cast<std::size_t>(moved),
                                                       last.algorithm) *
                            1e6);
        }
        std::fprintf(out, " %12zu %12zu %8s %7s %15s %11.2f %12.3f %12.3f %7.0f %10s\n",
                     static_cast<std::size_t>(moved), total,
                     std::string(to_string(spec.dtype)).c_str(),
                     std::string(to_string(spec.op)).c_str(), algo.c_str(), seconds * 1e6, algbw,
                     algbw * bus_bandwidth_factor(kind, n), wrong, model);
        std::fflush(out);
      }
      if (kind == CollectiveKind::kBarrier) break;
    }
  }
  return Status::ok();
}

Status run_mismatch(agent::Worker& w, MismatchKind kind, std::FILE* out) {
  const bool odd_one = w.rank() == w.size() - 1;
  const std::size_t count = 1000 + (odd_one && kind == MismatchKind::kCount ? 1 : 0);
  const DType dtype = odd_one && kind == MismatchKind::kDType ? DType::kInt32 : DType::kFloat32;
  static_assert(sizeof(float) == sizeof(std::int32_t));
  std::vector<float> data(count, 1.0f);  // as int32 these are other numbers: only the bytes matter
  auto r = w.all_reduce(data.data(), data.data(), count, dtype, ReduceOp::kSum);
  if (r) {
    return Status::ok();  // caller treats success as the failure of this workload
  }
  return r.status();
}

Status run_check(agent::Worker& w, const CheckSpec& spec, std::FILE* out) {
  const int n = w.size();
  const int rank = w.rank();
  std::vector<CollectiveKind> kinds = spec.kinds.empty() ? all_collective_kinds() : spec.kinds;
  std::vector<DType> dtypes = spec.dtypes;
  if (dtypes.empty()) {
    for (int t = 0; t < kNumDTypes; ++t) dtypes.push_back(static_cast<DType>(t));
  }
  int cases = 0;
  for (CollectiveKind kind : kinds) {
    for (DType dtype : dtypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        const bool reduces = kind == CollectiveKind::kAllReduce ||
                             kind == CollectiveKind::kReduce ||
                             kind == CollectiveKind::kReduceScatter;
        if (!reduces && op != ReduceOp::kSum) continue;
        for (std::size_t total : spec.counts) {
          const int root = n - 1;
          const BufferShape shape = buffer_shape(
              kind, total * (reduces || kind == CollectiveKind::kBroadcast ? 1 : n), n);
          TypedBuffer send = make_input(dtype, shape.send_count, rank);
          TypedBuffer recv(dtype, shape.recv_count);
          auto r = run_collective(w, kind, send.data(), recv.data(), shape, dtype, op, root);
          if (!r) {
            return error(r.status().code(),
                         std::string(to_string(kind)) + " " + std::string(to_string(dtype)) +
                             " count " + std::to_string(total) + ": " + r.status().message());
          }
          ++cases;
          if (!result_is_defined_here(kind, rank, root)) continue;
          const std::size_t wrong =
              count_wrong(recv, expected_result(kind, shape, dtype, op, rank, n, root));
          if (wrong != 0) {
            return error(StatusCode::kMismatch,
                         "rank " + std::to_string(rank) + ": " + std::string(to_string(kind)) +
                             " " + std::string(to_string(dtype)) + " " +
                             std::string(to_string(op)) + " count " + std::to_string(total) + ": " +
                             std::to_string(wrong) + " wrong elements");
          }
        }
      }
    }
  }
  if (rank == 0) std::fprintf(out, "check: %d collective cases correct on %d ranks\n", cases, n);
  return Status::ok();
}

}  // namespace tributary::cli
