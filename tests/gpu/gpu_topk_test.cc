// Top-k on the GPU against the CPU codec: identical payloads (selection, index format,
// values), identical residual and momentum, for sizes 10^3 .. 10^8 (odd included),
// densities that pick varint and bitmap, the exact small-tensor path, ties cut to k, all
// zeros; and the sampled selection against the exact top-k.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "gpu/device_codec.h"
#include "tests/gpu/gpu_test_util.h"

namespace tributary::gpu {
namespace {

using compression::CodecConfig;
using compression::CodecId;
using compression::EncodeOptions;
using testing::DeviceBuffer;
using testing::first_difference;

void check_topk(const std::vector<float>& x, const std::string& spec, bool residual, bool momentum,
                std::uint64_t step, TopKEncoder& encoder) {
  const std::size_t n = x.size();
  SCOPED_TRACE(spec + " n=" + std::to_string(n) + " residual=" + std::to_string(residual) +
               " momentum=" + std::to_string(momentum) + " step=" + std::to_string(step));
  auto config = compression::parse_codec_spec(spec);
  ASSERT_TRUE(config) << config.status().to_string();
  auto codec = compression::make_codec(*config);
  ASSERT_TRUE(codec) << codec.status().to_string();
  const std::size_t cap = (*codec)->max_encoded_bytes(n);
  ASSERT_EQ(cap, TopKEncoder::max_payload_bytes(*config, n));

  std::vector<float> r0 = residual ? testing::gradient(n, 6) : std::vector<float>{};
  std::vector<float> u0 = momentum ? testing::gradient(n, 7) : std::vector<float>{};
  std::vector<float> cpu_r = r0, cpu_u = u0;
  EncodeOptions o;
  o.seed = 1, o.stream = 2, o.step = step, o.rank = 3;
  if (residual) o.residual = cpu_r;
  if (momentum) o.momentum = cpu_u;
  std::vector<std::byte> cpu(cap);
  auto cpu_bytes = (*codec)->encode(x.data(), DType::kFloat32, n, cpu, o);
  ASSERT_TRUE(cpu_bytes) << cpu_bytes.status().to_string();

  DeviceBuffer<float> d_x(n), d_r(n), d_u(n);
  DeviceBuffer<std::byte> d_out(cap);
  d_x.upload(x.data(), n);
  if (residual) d_r.upload(r0.data(), n);
  if (momentum) d_u.upload(u0.data(), n);
  DeviceEncodeOptions d;
  d.seed = o.seed, d.stream = o.stream, d.step = o.step, d.rank = o.rank;
  d.residual = residual ? d_r.get() : nullptr;
  d.momentum = momentum ? d_u.get() : nullptr;
  auto gpu_bytes = encoder.encode(d_x.get(), n, *config, d, d_out.get(), cap, nullptr);
  ASSERT_TRUE(gpu_bytes) << gpu_bytes.status().to_string();
  TRIB_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(*gpu_bytes, *cpu_bytes);
  const std::vector<std::byte> gpu = d_out.download(*gpu_bytes);
  const long long diff = first_difference(cpu.data(), gpu.data(), *cpu_bytes);
  ASSERT_EQ(diff, -1) << "payloads differ first at byte " << diff << " of " << *cpu_bytes;
  if (residual) {
    const auto g = d_r.download(n);
    ASSERT_EQ(first_difference(cpu_r.data(), g.data(), 4 * n), -1) << "residuals differ";
  }
  if (momentum) {
    const auto g = d_u.download(n);
    ASSERT_EQ(first_difference(cpu_u.data(), g.data(), 4 * n), -1) << "momentum differs";
  }
  std::vector<float> out(n);
  TRIB_OK(compression::decode_payload(gpu, out.data(), n));
}

TEST(GpuTopK, MatchesCpuAcrossSizesAndDensities) {
  TRIB_REQUIRE_GPU();
  TopKEncoder encoder;
  for (std::size_t n : {1000ull, 1001ull, 5003ull, 65537ull, 1'000'003ull, 10'000'019ull}) {
    const std::vector<float> x = testing::gradient(n, n);
    for (const char* spec : {"topk:density=0.01,warmup=0", "topk:density=0.001,values=f16,warmup=0",
                             "topk:density=0.3,warmup=0", "topk:density=0.05,warmup=10"}) {
      check_topk(x, spec, false, false, 0, encoder);
      check_topk(x, spec, true, false, 25, encoder);
      if (::testing::Test::HasFatalFailure()) return;
    }
    check_topk(x, "topk:density=0.01,momentum=0.9,warmup=0", true, true, 3, encoder);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(GpuTopK, TiesZerosAndSkewMatchCpu) {
  TRIB_REQUIRE_GPU();
  TopKEncoder encoder;
  // Ties: candidates above 1.5k, cut to exactly k by (|v| desc, index asc).
  std::vector<float> ties(200'003);
  for (std::size_t i = 0; i < ties.size(); ++i)
    ties[i] = (i % 3 == 0 ? -1.0f : 1.0f) * static_cast<float>(1 + i % 4);
  check_topk(ties, "topk:density=0.01,warmup=0", true, false, 0, encoder);
  check_topk(std::vector<float>(100'000, 1.0f), "topk:density=0.01,warmup=0", false, false, 0,
             encoder);
  // All zeros, and a single non-zero.
  check_topk(std::vector<float>(100'000, 0.0f), "topk:density=0.01,warmup=0", true, false, 0,
             encoder);
  std::vector<float> one(1000, 0.0f);
  one[10] = 2.0f;
  check_topk(one, "topk:density=0.5,warmup=0", false, false, 0, encoder);
  // Skewed: a few huge values, a sample that misses them, retried rounds.
  std::vector<float> skew = testing::gradient(3'000'017, 8);
  for (std::size_t i = 0; i < skew.size(); i += 997) skew[i] *= 1e6f;
  check_topk(skew, "topk:density=0.02,warmup=0", true, false, 0, encoder);
  check_topk(skew, "topk:density=0.0001,warmup=0", false, false, 0, encoder);
}

TEST(GpuTopK, LargeTensorMatchesCpu) {
  TRIB_REQUIRE_GPU();
  const std::size_t n = 100'000'007;
  if (testing::device_free_bytes() < n * 24) GTEST_SKIP() << "not enough free device memory";
  TopKEncoder encoder;
  const std::vector<float> x = testing::gradient(n, 5);
  check_topk(x, "topk:density=0.01,warmup=0", true, false, 0, encoder);
}

// The sampled threshold keeps {|v| >= t}: a superset of the exact top-k when it keeps k
// or more, a subset when it keeps fewer; and it keeps within [k/1.5, 1.5k].
TEST(GpuTopK, SampledSelectionNestsWithExactTopK) {
  TRIB_REQUIRE_GPU();
  TopKEncoder encoder;
  for (std::size_t n : {1'000'003ull, 10'000'019ull}) {
    for (double density : {0.01, 0.001}) {
      const std::vector<float> x = testing::gradient(n, 40 + n);
      const std::size_t k = static_cast<std::size_t>(density * n + 0.5);
      const std::size_t cap = static_cast<std::size_t>(std::ceil(1.5 * density * n)) + 1;
      DeviceBuffer<float> d_x(n);
      DeviceBuffer<std::uint32_t> d_s(cap), d_e(k);
      d_x.upload(x.data(), n);
      auto ns = encoder.select_sampled(d_x.get(), n, k, cap, compression::rng_key(1, 2, 3, 4),
                                       d_s.get(), nullptr);
      ASSERT_TRUE(ns) << ns.status().to_string();
      auto ne = encoder.select_exact(d_x.get(), n, k, d_e.get(), nullptr);
      ASSERT_TRUE(ne) << ne.status().to_string();
      TRIB_CUDA_OK(cudaDeviceSynchronize());
      const auto s = d_s.download(*ns);
      const auto e = d_e.download(*ne);
      EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
      EXPECT_TRUE(std::is_sorted(e.begin(), e.end()));
      EXPECT_EQ(*ne, k);  // the data has far more than k non-zeros
      EXPECT_GE(static_cast<double>(*ns), k / 1.5);
      EXPECT_LE(static_cast<double>(*ns), k * 1.5);
      std::vector<std::uint32_t> both;
      std::set_intersection(s.begin(), s.end(), e.begin(), e.end(), std::back_inserter(both));
      EXPECT_EQ(both.size(), std::min(s.size(), e.size())) << "n=" << n << " density=" << density;
      std::printf("[   INFO   ] n=%zu k=%zu: sampled kept %zu, overlap with exact %.4f\n", n, k,
                  s.size(), static_cast<double>(both.size()) / static_cast<double>(k));
      // Exact: nothing unsent is larger than anything sent.
      std::vector<char> sent(n, 0);
      for (std::uint32_t i : e) sent[i] = 1;
      float min_sent = INFINITY, max_unsent = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float a = std::fabs(x[i]);
        if (sent[i])
          min_sent = std::min(min_sent, a);
        else
          max_unsent = std::max(max_unsent, a);
      }
      EXPECT_GE(min_sent, max_unsent);
    }
  }
}

TEST(GpuTopK, RejectsBadArguments) {
  TRIB_REQUIRE_GPU();
  TopKEncoder encoder;
  auto config = compression::parse_codec_spec("topk:density=0.01,warmup=0");
  ASSERT_TRUE(config);
  DeviceBuffer<float> d_x(1000);
  DeviceBuffer<std::byte> d_out(TopKEncoder::max_payload_bytes(*config, 1000));
  EXPECT_EQ(encoder.encode(d_x.get(), 1000, *config, {}, d_out.get(), 10, nullptr).status().code(),
            StatusCode::kInvalidArgument);
  auto qint = compression::parse_codec_spec("qint8");
  EXPECT_EQ(
      encoder.encode(d_x.get(), 1000, *qint, {}, d_out.get(), 1 << 20, nullptr).status().code(),
      StatusCode::kInvalidArgument);
  auto mom = compression::parse_codec_spec("topk:density=0.01,momentum=0.9,warmup=0");
  DeviceEncodeOptions o;
  o.momentum = d_x.get();
  EXPECT_EQ(encoder.encode(d_x.get(), 1000, *mom, o, d_out.get(), 1 << 20, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tributary::gpu
