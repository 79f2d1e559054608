// Workloads an agent process runs once it has joined: the benchmark sweep, the
// correctness check used by the multi-process integration tests, and training.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "agent/worker.h"
#include "cli/collective_kind.h"

namespace tributary::cli {

struct BenchSpec {
  std::vector<CollectiveKind> kinds = {CollectiveKind::kAllReduce};
  std::size_t min_bytes = 4096;
  std::size_t max_bytes = 64ull << 20;
  double factor = 4.0;
  int warmup = 5;
  int iters = 20;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool check = true;
};

// Runs the sweep; rank 0 prints nccl-tests-style rows to `out`.
Status run_bench(agent::Worker& worker, const BenchSpec& spec, std::FILE* out);

struct CheckSpec {
  std::vector<CollectiveKind> kinds;  // empty: all
  std::vector<DType> dtypes;          // empty: all
  std::vector<std::size_t> counts = {0, 1, 7, 1000, 70001};
};

// Runs every collective x dtype x count against a locally computed reference; returns
// kMismatch naming the first wrong case. Rank 0 prints a one-line summary.
Status run_check(agent::Worker& worker, const CheckSpec& spec, std::FILE* out);

// What the last rank gets wrong in run_mismatch.
enum class MismatchKind {
  kCount,  // 1001 elements instead of 1000
  kDType,  // int32 instead of float32: the same byte count, so only the dtype differs
};

// Every rank runs one all-reduce of 1000 float32, the last rank with `kind` different:
// every rank must come back with an error (never a hang, never a wrong sum). Returns
// that error.
Status run_mismatch(agent::Worker& worker, MismatchKind kind, std::FILE* out);

// Deterministic input element i of `rank`: small integers, so sums are exact in every dtype.
double check_value(int rank, std::size_t i);

}  // namespace tributary::cli
