// GPU reductions against core/reduce (the CPU reference): the same bits for float32,
// float16 and bfloat16 x sum/avg/prod/min/max, on random bit patterns (NaN, inf, -0,
// subnormals included), every float16 pair class, odd sizes and misaligned pointers; and
// scale_by_count.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/reduce.h"
#include "gpu/device_reduce.h"
#include "tests/gpu/gpu_test_util.h"

namespace tributary::gpu {
namespace {

using testing::DeviceBuffer;
using testing::first_difference;

// Random raw bit patterns of n elements of `size` bytes, with special values mixed in.
std::vector<unsigned char> random_bits(std::size_t n, std::size_t size, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<unsigned char> out(n * size);
  for (auto& b : out) b = static_cast<unsigned char>(gen());
  const std::uint32_t specials4[] = {0x00000000u, 0x80000000u, 0x7f800000u,
                                     0xff800000u, 0x7fc00000u, 0x7f800001u,
                                     0x00000001u, 0x80400000u, 0x3f800000u};
  const std::uint16_t specials2[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01,
                                     0x0001, 0x7f80, 0xff81, 0x3c00, 0x0400, 0x7bff};
  for (std::size_t i = 0; i < n; i += 7) {
    if (size == 4)
      std::memcpy(&out[i * 4], &specials4[gen() % 9], 4);
    else
      std::memcpy(&out[i * 2], &specials2[gen() % 12], 2);
  }
  return out;
}

void check_reduce(DType dtype, ReduceOp op, std::size_t n, std::size_t misalign,
                  std::uint32_t seed) {
  SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
               " n=" + std::to_string(n) + " misalign=" + std::to_string(misalign));
  const std::size_t size = dtype_size(dtype);
  auto dst = random_bits(n, size, seed);
  const auto src = random_bits(n, size, seed + 1);
  DeviceBuffer<unsigned char> d_dst((n + misalign) * size), d_src((n + misalign) * size);
  unsigned char* dd = d_dst.get() + misalign * size;
  unsigned char* ds = d_src.get() + misalign * size;
  TRIB_CUDA_OK(cudaMemcpy(dd, dst.data(), n * size, cudaMemcpyHostToDevice));
  TRIB_CUDA_OK(cudaMemcpy(ds, src.data(), n * size, cudaMemcpyHostToDevice));
  TRIB_OK(reduce_into(dd, ds, n, dtype, op, nullptr));
  reduce_into(dst.data(), src.data(), n, dtype, op);
  std::vector<unsigned char> got(n * size);
  TRIB_CUDA_OK(cudaMemcpy(got.data(), dd, n * size, cudaMemcpyDeviceToHost));
  const long long d = first_difference(dst.data(), got.data(), n * size);
  ASSERT_EQ(d, -1) << "differs first at element " << d / static_cast<long long>(size);
}

TEST(GpuReduce, MatchesCoreReduceBitForBit) {
  TRIB_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      for (std::size_t n : {1ull, 7ull, 1000ull, 1'000'003ull}) {
        check_reduce(dtype, op, n, 0, static_cast<std::uint32_t>(n));
        check_reduce(dtype, op, n, 1, static_cast<std::uint32_t>(n) + 9);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// Every float16 (and bfloat16) bit pattern against a permutation of all of them.
TEST(GpuReduce, AllHalfPatterns) {
  TRIB_REQUIRE_GPU();
  const std::size_t n = 65536;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      std::vector<std::uint16_t> dst(n), src(n);
      for (std::size_t i = 0; i < n; ++i) {
        dst[i] = static_cast<std::uint16_t>(i);
        src[i] = static_cast<std::uint16_t>((i * 40503u + 17u) & 0xffffu);
      }
      DeviceBuffer<std::uint16_t> d_dst(n), d_src(n);
      d_dst.upload(dst.data(), n);
      d_src.upload(src.data(), n);
      TRIB_OK(reduce_into(d_dst.get(), d_src.get(), n, dtype, op, nullptr));
      reduce_into(dst.data(), src.data(), n, dtype, op);
      const auto got = d_dst.download(n);
      EXPECT_EQ(first_difference(dst.data(), got.data(), 2 * n), -1)
          << to_string(dtype) << " " << to_string(op);
    }
  }
}

TEST(GpuReduce, LargeSumMatches) {
  TRIB_REQUIRE_GPU();
  const std::size_t n = 100'000'007;
  check_reduce(DType::kFloat32, ReduceOp::kSum, n, 0, 5);
  check_reduce(DType::kBFloat16, ReduceOp::kSum, n, 0, 6);
}

TEST(GpuReduce, ScaleByCountMatches) {
  TRIB_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int contributors : {1, 3, 7}) {
      const std::size_t n = 100'003;
      auto data = random_bits(n, dtype_size(dtype), 31);
      DeviceBuffer<unsigned char> d(data.size());
      d.upload(data.data(), data.size());
      TRIB_OK(scale_by_count(d.get(), n, dtype, contributors, nullptr));
      scale_by_count(data.data(), n, dtype, contributors);
      const auto got = d.download(data.size());
      EXPECT_EQ(first_difference(data.data(), got.data(), data.size()), -1)
          << to_string(dtype) << " / " << contributors;
    }
  }
}

TEST(GpuReduce, OtherTypesAreRefused) {
  TRIB_REQUIRE_GPU();
  DeviceBuffer<int> d(16);
  EXPECT_EQ(reduce_into(d.get(), d.get(), 16, DType::kInt32, ReduceOp::kSum, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scale_by_count(d.get(), 16, DType::kFloat32, 0, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::gpu

namespace tributary::gpu {
namespace {

// reduce_sources (the CUDA IPC all-reduce's one-pass fold) against core's left fold:
// dst = s0 op s1 op ... (op sK), then the kAvg division, to the bit, aligned or not.
void check_sources(DType dtype, ReduceOp op, int sources, std::size_t n, std::size_t misalign) {
  SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(op)) +
               " sources=" + std::to_string(sources) + " n=" + std::to_string(n) +
               " misalign=" + std::to_string(misalign));
  const std::size_t size = dtype_size(dtype);
  std::vector<std::vector<unsigned char>> in;
  std::vector<DeviceBuffer<unsigned char>> dev;
  std::vector<const void*> ptrs;
  for (int s = 0; s < sources; ++s) {
    in.push_back(random_bits(n, size, static_cast<std::uint32_t>(100 * s + n)));
    dev.emplace_back((n + misalign) * size);
  }
  for (int s = 0; s < sources; ++s) {
    unsigned char* p = dev[static_cast<std::size_t>(s)].get() + misalign * size;
    TRIB_CUDA_OK(
        cudaMemcpy(p, in[static_cast<std::size_t>(s)].data(), n * size, cudaMemcpyHostToDevice));
    ptrs.push_back(p);
  }
  DeviceBuffer<unsigned char> d_dst((n + misalign) * size);
  unsigned char* dd = d_dst.get() + misalign * size;
  const int divide = op == ReduceOp::kAvg ? sources : 0;
  TRIB_OK(reduce_sources(dd, ptrs.data(), sources, n, dtype, op, divide, nullptr));
  std::vector<unsigned char> want = in[0];
  for (int s = 1; s < sources; ++s)
    reduce_into(want.data(), in[static_cast<std::size_t>(s)].data(), n, dtype, op);
  if (divide > 0) scale_by_count(want.data(), n, dtype, divide);
  std::vector<unsigned char> got(n * size);
  TRIB_CUDA_OK(cudaMemcpy(got.data(), dd, n * size, cudaMemcpyDeviceToHost));
  const long long d = first_difference(want.data(), got.data(), n * size);
  ASSERT_EQ(d, -1) << "differs first at element " << d / static_cast<long long>(size);
}

TEST(GpuReduce, ReduceSourcesIsTheLeftFoldBitForBit) {
  TRIB_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax}) {
      for (int sources : {1, 2, 3, 8}) {
        for (std::size_t n : {1ull, 1000ull, 1'000'003ull}) {
          check_sources(dtype, op, sources, n, 0);
          check_sources(dtype, op, sources, n, 1);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(GpuReduce, ReduceSourcesRefusesTooManySources) {
  const void* p[9] = {};
  EXPECT_EQ(reduce_sources(nullptr, p, 9, 10, DType::kFloat32, ReduceOp::kSum, 0, nullptr).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::gpu
