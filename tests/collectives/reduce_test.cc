#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "algorithms/collectives.h"
#include "algorithms/memory_link.h"
#include "core/reduce.h"
#include "tests/collectives/sweep.h"
#include "tests/support/rank_threads.h"

namespace tributary::testing {
namespace {

bool is_unsigned(DType d) { return d == DType::kUInt8; }

// Small integers, so every partial result is exact in every dtype (bfloat16 included) and
// the reference does not depend on the order of reduction; integer products wrap, and
// wrap the same way in any order. Products stay within +-16 for the floating types.
std::int64_t input_value(int rank, std::size_t i, DType dtype, ReduceOp op) {
  const std::uint64_t h = (static_cast<std::uint64_t>(rank) * 0x9e3779b97f4a7c15ull) ^
                          (static_cast<std::uint64_t>(i) * 0xbf58476d1ce4e5b9ull);
  const std::uint64_t m = (h ^ (h >> 31)) * 0x94d049bb133111ebull >> 40;
  if (op == ReduceOp::kProd) {
    if ((static_cast<std::size_t>(rank) + i) % 4 == 0) return 2;
    return (m & 1) != 0 || is_unsigned(dtype) ? 1 : -1;
  }
  return is_unsigned(dtype) ? static_cast<std::int64_t>(m % 5)
                            : static_cast<std::int64_t>(m % 9) - 4;
}

void store_float(DType dtype, std::byte* dst, float f) {
  switch (dtype) {
    case DType::kFloat32: std::memcpy(dst, &f, 4); return;
    case DType::kFloat16: float_to_half(&f, dst, 1); return;
    case DType::kBFloat16: float_to_bfloat16(&f, dst, 1); return;
    default: FAIL() << "not a narrow float";
  }
}

template <typename T>
void store_as(std::byte* dst, T v) {
  std::memcpy(dst, &v, sizeof v);
}

void store_exact(DType dtype, std::byte* dst, std::int64_t v) {
  switch (dtype) {
    case DType::kFloat64: return store_as(dst, static_cast<double>(v));
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16: return store_float(dtype, dst, static_cast<float>(v));
    case DType::kInt8: return store_as(dst, static_cast<std::int8_t>(v));
    case DType::kUInt8: return store_as(dst, static_cast<std::uint8_t>(v));
    case DType::kInt32: return store_as(dst, static_cast<std::int32_t>(v));
    case DType::kInt64: return store_as(dst, v);
  }
}

// The expected element: computed in int64, then divided once for avg the way the
// contract says (integer division truncates; floats divide in their accumulation type).
void store_expected(DType dtype, ReduceOp op, std::byte* dst, const std::vector<std::int64_t>& v) {
  std::int64_t acc = v[0];
  for (std::size_t r = 1; r < v.size(); ++r) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v[r]; break;
      case ReduceOp::kProd: acc *= v[r]; break;
      case ReduceOp::kMin: acc = std::min(acc, v[r]); break;
      case ReduceOp::kMax: acc = std::max(acc, v[r]); break;
    }
  }
  if (op != ReduceOp::kAvg) return store_exact(dtype, dst, acc);
  const auto n = static_cast<std::int64_t>(v.size());
  if (!is_floating(dtype)) return store_exact(dtype, dst, acc / n);
  if (dtype == DType::kFloat64)
    return store_as(dst, static_cast<double>(acc) / static_cast<double>(n));
  store_float(dtype, dst, static_cast<float>(acc) / static_cast<float>(n));
}

struct Point {
  CountCase shape;
  int root;
  bool in_place;
};

class ReduceSweep : public ::testing::TestWithParam<std::tuple<int, DType, ReduceOp>> {};

TEST_P(ReduceSweep, RootGetsReferenceOthersUntouched) {
  const auto [n, dtype, op] = GetParam();
  const std::size_t esize = dtype_size(dtype);
  std::vector<Point> runs;
  for (const CountCase& c : count_cases(n, dtype, 10007, /*chunked=*/true)) {
    for (int root : roots_for(n)) runs.push_back({c, root, (runs.size() % 2) == 1});
  }
  // in[rank][run]; out[rank][run] is the root's result, or a guard on the others.
  std::vector<std::vector<std::vector<std::byte>>> in(n), out(n);
  std::vector<std::vector<std::byte>> expected;
  std::vector<std::int64_t> column(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const std::size_t count = runs[k].shape.count;
    for (int r = 0; r < n; ++r) {
      in[r].emplace_back(count * esize);
      out[r].push_back(pattern(k * 131 + r, count * esize));
    }
    expected.emplace_back(count * esize);
    for (std::size_t i = 0; i < count; ++i) {
      for (int r = 0; r < n; ++r) {
        column[r] = input_value(r, i, dtype, op);
        store_exact(dtype, in[r][k].data() + i * esize, column[r]);
      }
      store_expected(dtype, op, expected[k].data() + i * esize, column);
    }
    if (runs[k].in_place) out[runs[k].root][k] = in[runs[k].root][k];
  }
  const auto guards = out;

  algorithms::MemoryFabric fabric(n);
  const auto statuses = run_ranks(n, [&](int r) {
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const Point& run = runs[k];
      algorithms::CollectiveOptions options;
      options.seq = k;
      options.chunk_bytes = run.shape.chunk_bytes;
      options.deadline = Deadline::after(std::chrono::seconds(20));
      const bool in_place = run.in_place && r == run.root;
      void* recv = out[r][k].data();
      const void* send = in_place ? recv : in[r][k].data();
      Status s = reduce(fabric.link(r), send, recv, run.shape.count, dtype, op, run.root, options);
      if (!s.is_ok()) return annotate(s, "run " + std::to_string(k));
    }
    return Status::ok();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].is_ok()) << "rank " << r << ": " << statuses[r].to_string();
  }
  for (std::size_t k = 0; k < runs.size(); ++k) {
    for (int r = 0; r < n; ++r) {
      const auto& want = r == runs[k].root ? expected[k] : guards[r][k];
      ASSERT_EQ(out[r][k], want) << "rank " << r << " count " << runs[k].shape.count << " chunk "
                                 << runs[k].shape.chunk_bytes << " root " << runs[k].root
                                 << " in-place " << runs[k].in_place;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ReduceSweep,
                         ::testing::Combine(::testing::Range(1, kMaxWorld + 1),
                                            ::testing::ValuesIn(all_dtypes()),
                                            ::testing::ValuesIn(all_ops())),
                         [](const auto& info) {
                           return sweep_name(std::get<0>(info.param), std::get<1>(info.param)) +
                                  "_" + std::string(to_string(std::get<2>(info.param)));
                         });

// Floating-point sums depend on the order of reduction; with inputs that round, the fixed
// order must still give the same bits on every repetition, however threads interleave.
TEST(Reduce, RoundingInputsGiveRepeatableBits) {
  constexpr int kWorld = 7;
  constexpr std::size_t kCount = 999;
  std::vector<std::vector<float>> in(kWorld, std::vector<float>(kCount));
  for (int r = 0; r < kWorld; ++r) {
    for (std::size_t i = 0; i < kCount; ++i) in[r][i] = 1.0f / static_cast<float>(r * 7 + i + 3);
  }
  std::vector<float> first;
  for (int attempt = 0; attempt < 3; ++attempt) {
    algorithms::MemoryFabric fabric(kWorld);
    std::vector<float> out(kCount);
    const auto statuses = run_ranks(kWorld, [&](int r) {
      algorithms::CollectiveOptions options;
      options.chunk_bytes = 100;
      return reduce(fabric.link(r), in[r].data(), r == 2 ? out.data() : nullptr, kCount,
                    DType::kFloat32, ReduceOp::kSum, 2, options);
    });
    for (const Status& s : statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
    if (attempt == 0) first = out;
    ASSERT_EQ(0, std::memcmp(first.data(), out.data(), kCount * sizeof(float)));
  }
}

TEST(Reduce, RelayPassesFirstChunkOnBeforeTheRestArrives) {
  constexpr int kWorld = 4;
  constexpr std::size_t kCount = 4096;
  algorithms::MemoryFabric fabric(kWorld);
  FirstSendProbe relay(fabric.link(2));  // the chain runs 3 -> 2 -> 1 -> 0
  std::vector<std::int32_t> in(kCount, 2);
  std::vector<std::int32_t> out(kCount);
  const auto statuses = run_ranks(kWorld, [&](int r) {
    algorithms::CollectiveOptions options;
    options.chunk_bytes = 128;
    algorithms::Link& link = r == 2 ? relay : fabric.link(r);
    return reduce(link, in.data(), out.data(), kCount, DType::kInt32, ReduceOp::kSum, 0, options);
  });
  for (const Status& s : statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(relay.waits_before_first_send(), 1);
  EXPECT_EQ(out, std::vector<std::int32_t>(kCount, 2 * kWorld));
}

TEST(Reduce, InvalidRootAndOpAreInvalidArgument) {
  algorithms::MemoryFabric fabric(2);
  std::vector<float> buf(4);
  EXPECT_EQ(
      reduce(fabric.link(0), buf.data(), buf.data(), 4, DType::kFloat32, ReduceOp::kSum, 2, {})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(reduce(fabric.link(0), buf.data(), buf.data(), 4, DType::kFloat32,
                   static_cast<ReduceOp>(kNumReduceOps), 0, {})
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::testing
