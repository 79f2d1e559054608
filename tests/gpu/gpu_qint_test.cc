// qint8/qint4 on the GPU against the CPU codec (the reference): identical payload bytes,
// identical residuals, cross-decoding both ways with identical floats, decode-accumulate,
// for 10^3 .. 10^9 elements (odd sizes, the 10^9 case when the device has the memory),
// every kernel path (warp-per-bucket vector/scalar, large buckets, misaligned pointers),
// non-finite input and payload validation agreeing with the CPU decoder.
#include <cmath>
#include <limits>
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

struct Case {
  int bits = 8;
  std::uint32_t bucket = 512;
  bool stochastic = true;
  bool residual = false;
  std::uint64_t element_offset = 0;
  std::size_t misalign = 0;  // elements: device pointers offset to take the scalar paths
};

std::string name(const Case& c, std::size_t n) {
  return "qint" + std::to_string(c.bits) + " n=" + std::to_string(n) +
         " bucket=" + std::to_string(c.bucket) + " stochastic=" + std::to_string(c.stochastic) +
         " residual=" + std::to_string(c.residual) + " offset=" + std::to_string(c.element_offset) +
         " misalign=" + std::to_string(c.misalign);
}

// cudaMemcpy that leaves empty tensors (whose host pointers may be null) alone.
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  return bytes == 0 ? cudaSuccess : cudaMemcpy(dst, src, bytes, kind);
}

// Encodes x on the CPU and the GPU and checks bytes, residuals and decodes.
void check_qint(const std::vector<float>& x, const Case& c) {
  const std::size_t n = x.size();
  SCOPED_TRACE(name(c, n));
  CodecConfig config;
  config.codec = c.bits == 8 ? CodecId::kQInt8 : CodecId::kQInt4;
  config.bucket_size = c.bucket;
  config.stochastic = c.stochastic;
  auto codec = compression::make_codec(config);
  ASSERT_TRUE(codec) << codec.status().to_string();
  auto params = qint_params(config);
  ASSERT_TRUE(params);
  const std::size_t bytes = qint_payload_bytes(*params, n);
  ASSERT_EQ(bytes, (*codec)->max_encoded_bytes(n));

  // CPU reference.
  std::vector<float> r0 = c.residual ? testing::gradient(n, 5) : std::vector<float>{};
  std::vector<float> cpu_r = r0;
  EncodeOptions o;
  o.seed = 11, o.stream = 22, o.step = 33, o.rank = 4, o.element_offset = c.element_offset;
  if (c.residual) o.residual = cpu_r;
  std::vector<std::byte> cpu(bytes);
  auto written = (*codec)->encode(x.data(), DType::kFloat32, n, cpu, o);
  ASSERT_TRUE(written) << written.status().to_string();
  ASSERT_EQ(*written, bytes);

  // GPU.
  DeviceBuffer<float> d_x(n + c.misalign), d_r(c.residual ? n + c.misalign : 0);
  DeviceBuffer<std::byte> d_out(bytes), d_cpu(bytes);
  DeviceBuffer<std::uint32_t> d_flag(1);
  ASSERT_TRUE(d_x.ok() && d_out.ok() && d_cpu.ok() && d_flag.ok());
  float* x_at = d_x.get() + c.misalign;
  float* r_at = c.residual ? d_r.get() + c.misalign : nullptr;
  TRIB_CUDA_OK(copy(x_at, x.data(), 4 * n, cudaMemcpyHostToDevice));
  if (c.residual) TRIB_CUDA_OK(copy(r_at, r0.data(), 4 * n, cudaMemcpyHostToDevice));
  TRIB_CUDA_OK(cudaMemset(d_flag.get(), 0, 4));
  DeviceEncodeOptions d;
  d.seed = o.seed, d.stream = o.stream, d.step = o.step, d.rank = o.rank;
  d.element_offset = c.element_offset;
  d.residual = r_at;
  TRIB_OK(qint_encode(x_at, n, *params, d, d_out.get(), d_flag.get(), nullptr));
  TRIB_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<std::byte> gpu = d_out.download(bytes);
  EXPECT_EQ(d_flag.download(1)[0], 0u);
  const long long diff = first_difference(cpu.data(), gpu.data(), bytes);
  ASSERT_EQ(diff, -1) << "payloads differ first at byte " << diff << " of " << bytes;
  if (c.residual) {
    std::vector<float> gpu_r(n);
    TRIB_CUDA_OK(copy(gpu_r.data(), r_at, 4 * n, cudaMemcpyDeviceToHost));
    const long long rd = first_difference(cpu_r.data(), gpu_r.data(), 4 * n);
    ASSERT_EQ(rd, -1) << "residuals differ first at element " << rd / 4;
  }

  // Cross-decoding: the GPU payload on the CPU, the CPU payload on the GPU.
  std::vector<float> on_cpu(n);
  TRIB_OK(compression::decode_payload(gpu, on_cpu.data(), n));
  auto header = check_payload(cpu, n);
  ASSERT_TRUE(header) << header.status().to_string();
  d_cpu.upload(cpu.data(), bytes);
  TRIB_OK(qint_decode(*header, d_cpu.get(), x_at, n, false, nullptr));
  std::vector<float> on_gpu(n);
  TRIB_CUDA_OK(copy(on_gpu.data(), x_at, 4 * n, cudaMemcpyDeviceToHost));
  const long long dd = first_difference(on_cpu.data(), on_gpu.data(), 4 * n);
  ASSERT_EQ(dd, -1) << "decodes differ first at element " << dd / 4;

  // Fused dequantize-and-accumulate.
  std::vector<float> acc = testing::gradient(n, 77);
  TRIB_CUDA_OK(copy(x_at, acc.data(), 4 * n, cudaMemcpyHostToDevice));
  TRIB_OK(compression::decode_accumulate_payload(cpu, acc.data(), n));
  TRIB_OK(qint_decode(*header, d_cpu.get(), x_at, n, true, nullptr));
  TRIB_CUDA_OK(copy(on_gpu.data(), x_at, 4 * n, cudaMemcpyDeviceToHost));
  const long long ad = first_difference(acc.data(), on_gpu.data(), 4 * n);
  ASSERT_EQ(ad, -1) << "accumulations differ first at element " << ad / 4;
}

TEST(GpuQInt, MatchesCpuAcrossPathsAndSizes) {
  TRIB_REQUIRE_GPU();
  const std::vector<std::size_t> sizes = {0, 1, 3, 1000, 1001, 4097, 65537, 1'000'003};
  for (int bits : {8, 4}) {
    // Vector paths (bucket % 4 == 0), scalar paths (odd or 2 mod 4), a bucket larger than
    // the one-warp limit (two-kernel path), and one larger than the whole tensor.
    const std::vector<std::uint32_t> buckets =
        bits == 8 ? std::vector<std::uint32_t>{512, 4096, 7, 1000, 8192, 65536, 1u << 24}
                  : std::vector<std::uint32_t>{512, 4096, 2, 998, 10002, 65536, 1u << 24};
    for (std::uint32_t bucket : buckets) {
      for (std::size_t n : sizes) {
        for (bool stochastic : {true, false}) {
          for (bool residual : {false, true}) {
            const std::vector<float> x = testing::gradient(n, n + bucket);
            check_qint(x, Case{bits, bucket, stochastic, residual, 0, 0});
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(GpuQInt, MisalignedPointersTakeScalarPaths) {
  TRIB_REQUIRE_GPU();
  for (int bits : {8, 4}) {
    for (std::size_t n : {4097u, 100'003u}) {
      const std::vector<float> x = testing::gradient(n, 3);
      check_qint(x, Case{bits, 512, true, true, 0, 1});
      check_qint(x, Case{bits, 512, true, false, 0, 3});
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(GpuQInt, RngCounterCrossesTheHigh32Bits) {
  TRIB_REQUIRE_GPU();
  // element_offset just below 2^32: the counter's high word changes inside the tensor.
  const std::vector<float> x = testing::gradient(1'000'003, 9);
  for (int bits : {8, 4}) {
    check_qint(x, Case{bits, 512, true, true, (std::uint64_t{1} << 32) - 12'345, 0});
    check_qint(x, Case{bits, 4096, true, false, (std::uint64_t{5} << 32) + 77, 0});
  }
}

// Buckets whose amax is below L / FLT_MAX (~3.7e-37), where L / amax overflows: both the
// CPU and the GPU encode them as zeros, byte for byte.
TEST(GpuQInt, TinyBucketsMatchCpu) {
  TRIB_REQUIRE_GPU();
  std::vector<float> x(10'000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float tiny[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-45f, 2e-38f, -3e-37f, 1e-44f};
    x[i] = tiny[(i * 7 + i / 512) % 8];
    if (i >= 5120) x[i] = (i % 3 == 0) ? 1e-3f : 0.0f;  // ordinary buckets after
  }
  for (int bits : {8, 4}) {
    for (bool stochastic : {true, false}) {
      check_qint(x, Case{bits, 512, stochastic, true, 0, 0});
      check_qint(x, Case{bits, 4096, stochastic, false, 0, 0});
    }
  }
}

// 10^7, 10^8 and 10^9 elements (odd counts), qint8 and qint4, stochastic; the largest
// only when the device has room for input, payloads and output with a margin.
TEST(GpuQInt, LargeTensorsMatchCpu) {
  TRIB_REQUIRE_GPU();
  for (std::size_t n : {10'000'019ull, 100'000'007ull, 1'000'000'000ull}) {
    const std::size_t need = n * (4 + 4 + 2) + (std::size_t{1} << 30);
    if (testing::device_free_bytes() < need) {
      std::printf("[   INFO   ] skipping n=%zu: needs %zu bytes of free device memory\n", n, need);
      continue;
    }
    const std::vector<float> x = testing::gradient(n, 1);
    check_qint(x, Case{8, 512, true, false, 1000, 0});
    if (::testing::Test::HasFatalFailure()) return;
    check_qint(x, Case{4, 512, true, false, 1000, 0});
    if (::testing::Test::HasFatalFailure()) return;
    if (n <= 100'000'007ull) check_qint(x, Case{8, 512, true, true, 0, 0});
  }
}

TEST(GpuQInt, NonFiniteInputIsFlaggedAndRejectedByDecoders) {
  TRIB_REQUIRE_GPU();
  const std::size_t n = 5000;
  for (float bad :
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x = testing::gradient(n, 2);
    x[1234] = bad;
    const QIntParams p{8, 512, true};
    const std::size_t bytes = qint_payload_bytes(p, n);
    DeviceBuffer<float> d_x(n);
    DeviceBuffer<std::byte> d_out(bytes);
    DeviceBuffer<std::uint32_t> d_flag(1);
    d_x.upload(x.data(), n);
    TRIB_CUDA_OK(cudaMemset(d_flag.get(), 0, 4));
    TRIB_OK(qint_encode(d_x.get(), n, p, {}, d_out.get(), d_flag.get(), nullptr));
    TRIB_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(d_flag.download(1)[0], 1u);
    const std::vector<std::byte> payload = d_out.download(bytes);
    std::vector<float> out(n);
    EXPECT_EQ(compression::decode_payload(payload, out.data(), n).code(), StatusCode::kBadFrame);
    EXPECT_EQ(check_payload(payload, n).status().code(), StatusCode::kBadFrame);
    // The CPU encoder refuses the same input.
    auto codec = compression::make_codec("qint8");
    std::vector<std::byte> cpu((*codec)->max_encoded_bytes(n));
    EXPECT_EQ((*codec)->encode(x.data(), DType::kFloat32, n, cpu, {}).status().code(),
              StatusCode::kInvalidArgument);
  }
}

// check_payload must accept exactly what the CPU decoder accepts.
TEST(GpuQInt, PayloadCheckAgreesWithCpuDecoder) {
  const std::size_t n = 1001;
  for (const char* spec : {"qint8:bucket=100", "qint4:bucket=100"}) {
    auto codec = compression::make_codec(spec);
    ASSERT_TRUE(codec);
    const std::vector<float> x = testing::gradient(n, 4);
    std::vector<std::byte> good((*codec)->max_encoded_bytes(n));
    ASSERT_TRUE((*codec)->encode(x.data(), DType::kFloat32, n, good, {}));
    const std::size_t scales = compression::kHeaderBytes;
    std::vector<std::vector<std::byte>> cases;
    cases.push_back(good);
    auto mutate = [&](std::size_t at, std::byte v) {
      auto p = good;
      p[at] = v;
      cases.push_back(p);
    };
    mutate(0, std::byte{0x55});                   // magic
    mutate(3, std::byte{2});                      // version
    mutate(4, std::byte{0xea});                   // count 1001 -> 1002
    mutate(8, std::byte{0});                      // bucket 100 -> 0
    mutate(8, std::byte{101});                    // odd bucket (qint4)
    mutate(12, std::byte{2});                     // unknown flag
    mutate(scales + 3, std::byte{0x80});          // negative scale
    mutate(scales + 7, std::byte{0x7f});          // huge or non-finite scale
    mutate(scales + 4 * 5 + 2, std::byte{0xc0});  // NaN scale (0x7fc0....)
    mutate(scales + 4 * 5 + 3, std::byte{0x7f});
    mutate(good.size() - 1, std::byte{0xf7});          // pad nibble (qint4)
    cases.emplace_back(good.begin(), good.end() - 1);  // short
    auto longer = good;
    longer.push_back(std::byte{0});
    cases.push_back(longer);                              // long
    cases.emplace_back(good.begin(), good.begin() + 10);  // shorter than a header
    for (std::size_t i = 0; i < cases.size(); ++i) {
      std::vector<float> out(n);
      const bool cpu_ok = compression::decode_payload(cases[i], out.data(), n).is_ok();
      const bool gpu_ok = check_payload(cases[i], n).is_ok();
      EXPECT_EQ(cpu_ok, gpu_ok) << spec << " case " << i;
    }
    EXPECT_TRUE(check_payload(good, n));
    EXPECT_FALSE(check_payload(good, n + 1));
  }
}

}  // namespace
}  // namespace tributary::gpu
