// The staging pipeline over a loopback "network": every chunk payload sent equals the CPU
// codec's payload for that chunk (element_offset advanced), the receive side accumulates
// exactly what the CPU's decode_accumulate gives, and failures (a send error, a garbage or
// truncated chunk, a non-finite value) come back as Statuses with nothing left in flight.
#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "gpu/staging.h"
#include "tests/gpu/gpu_test_util.h"

namespace tributary::gpu {
namespace {

using testing::DeviceBuffer;
using testing::first_difference;

struct Loopback {
  std::deque<std::vector<std::byte>> wire;
  SendBytes sender() {
    return [this](std::span<const std::byte> p) {
      wire.emplace_back(p.begin(), p.end());
      return Status::ok();
    };
  }
  RecvBytes receiver() {
    return [this](std::span<std::byte> buf) -> Result<std::size_t> {
      if (wire.empty()) return error(StatusCode::kPeerLost, "loopback: nothing left");
      const auto p = std::move(wire.front());
      wire.pop_front();
      if (p.size() > buf.size()) return error(StatusCode::kBadFrame, "loopback: too large");
      std::copy(p.begin(), p.end(), buf.begin());
      return p.size();
    };
  }
};

void round_trip(int bits, std::size_t n, std::size_t chunk, int depth, bool residual) {
  SCOPED_TRACE("qint" + std::to_string(bits) + " n=" + std::to_string(n) +
               " chunk=" + std::to_string(chunk) + " depth=" + std::to_string(depth) +
               " residual=" + std::to_string(residual));
  StagingConfig config;
  config.codec = QIntParams{bits, 512, true};
  config.chunk_elements = chunk;
  config.depth = depth;
  cudaStream_t stream = nullptr;
  TRIB_CUDA_OK(cudaStreamCreate(&stream));
  auto pipeline = StagingPipeline::create(config, stream);
  ASSERT_TRUE(pipeline) << pipeline.status().to_string();

  const std::vector<float> x = testing::gradient(n, 12);
  std::vector<float> r0 = residual ? testing::gradient(n, 13) : std::vector<float>{};
  DeviceBuffer<float> d_x(n), d_r(n), d_acc(n);
  d_x.upload(x.data(), n);
  if (residual) d_r.upload(r0.data(), n);
  DeviceEncodeOptions o;
  o.seed = 3, o.stream = 4, o.step = 5, o.rank = 1, o.element_offset = 777;
  o.residual = residual ? d_r.get() : nullptr;
  Loopback net;
  TRIB_OK((*pipeline)->send(d_x.get(), n, o, net.sender()));
  const std::size_t chunks = (n + chunk - 1) / chunk;
  ASSERT_EQ(net.wire.size(), chunks);
  EXPECT_EQ((*pipeline)->last_stats().chunks, chunks);

  // Each chunk is the CPU codec's payload of that slice.
  compression::CodecConfig cc;
  cc.codec = bits == 8 ? compression::CodecId::kQInt8 : compression::CodecId::kQInt4;
  cc.bucket_size = 512;
  auto codec = compression::make_codec(cc);
  ASSERT_TRUE(codec);
  std::vector<float> cpu_r = r0;
  std::vector<float> acc = testing::gradient(n, 14);
  d_acc.upload(acc.data(), n);
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t begin = c * chunk, len = std::min(chunk, n - begin);
    compression::EncodeOptions e;
    e.seed = 3, e.stream = 4, e.step = 5, e.rank = 1, e.element_offset = 777 + begin;
    if (residual) e.residual = std::span<float>(cpu_r).subspan(begin, len);
    std::vector<std::byte> cpu((*codec)->max_encoded_bytes(len));
    ASSERT_TRUE((*codec)->encode(x.data() + begin, DType::kFloat32, len, cpu, e));
    ASSERT_EQ(cpu.size(), net.wire[c].size()) << "chunk " << c;
    ASSERT_EQ(first_difference(cpu.data(), net.wire[c].data(), cpu.size()), -1) << "chunk " << c;
    TRIB_OK(compression::decode_accumulate_payload(cpu, acc.data() + begin, len));
  }
  if (residual) {
    const auto g = d_r.download(n);
    ASSERT_EQ(first_difference(cpu_r.data(), g.data(), 4 * n), -1) << "residuals differ";
  }

  TRIB_OK((*pipeline)->receive_accumulate(d_acc.get(), n, net.receiver()));
  const auto got = d_acc.download(n);
  ASSERT_EQ(first_difference(acc.data(), got.data(), 4 * n), -1) << "accumulations differ";
  pipeline->reset();
  TRIB_CUDA_OK(cudaStreamDestroy(stream));
}

TEST(GpuStaging, LoopbackMatchesCpuChunkByChunk) {
  TRIB_REQUIRE_GPU();
  round_trip(8, 10'000'019, 1 << 20, 3, false);
  round_trip(8, 10'000'019, 1 << 20, 2, true);
  round_trip(4, 3'000'001, 250'000, 3, true);  // chunk not a multiple of the bucket
  round_trip(4, 1001, 1 << 20, 3, false);      // one short chunk
  round_trip(8, 5'000'000, 1'000'000, 8, false);
}

TEST(GpuStaging, FailuresComeBackAsStatus) {
  TRIB_REQUIRE_GPU();
  StagingConfig config;
  config.chunk_elements = 100'000;
  auto pipeline = StagingPipeline::create(config, nullptr);
  ASSERT_TRUE(pipeline);
  const std::size_t n = 1'000'000;
  std::vector<float> x = testing::gradient(n, 1);
  DeviceBuffer<float> d_x(n);
  d_x.upload(x.data(), n);

  // The network fails on the fourth chunk.
  int calls = 0;
  const Status st = (*pipeline)->send(d_x.get(), n, {}, [&](std::span<const std::byte>) {
    return ++calls == 4 ? error(StatusCode::kPeerLost, "link down") : Status::ok();
  });
  EXPECT_EQ(st.code(), StatusCode::kPeerLost);
  EXPECT_EQ(calls, 4);

  // A non-finite value in chunk 6.
  x[650'000] = INFINITY;
  d_x.upload(x.data(), n);
  Loopback net;
  EXPECT_EQ((*pipeline)->send(d_x.get(), n, {}, net.sender()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(net.wire.size(), 6u);

  // Garbage and truncated chunks are refused before they reach the GPU.
  x[650'000] = 0.0f;
  d_x.upload(x.data(), n);
  net.wire.clear();
  TRIB_OK((*pipeline)->send(d_x.get(), n, {}, net.sender()));
  net.wire[2][20] = std::byte{0xff};  // a scale byte -> negative or NaN scale
  net.wire[2][23] = std::byte{0xff};
  DeviceBuffer<float> d_acc(n);
  EXPECT_EQ((*pipeline)->receive_accumulate(d_acc.get(), n, net.receiver()).code(),
            StatusCode::kBadFrame);
  net.wire.clear();
  TRIB_OK((*pipeline)->send(d_x.get(), n, {}, net.sender()));
  net.wire[0].pop_back();
  EXPECT_EQ((*pipeline)->receive_accumulate(d_acc.get(), n, net.receiver()).code(),
            StatusCode::kBadFrame);
  // The peer vanishes mid-tensor.
  net.wire.clear();
  TRIB_OK((*pipeline)->send(d_x.get(), n, {}, net.sender()));
  net.wire.resize(5);
  EXPECT_EQ((*pipeline)->receive_accumulate(d_acc.get(), n, net.receiver()).code(),
            StatusCode::kPeerLost);
}

TEST(GpuStaging, RejectsBadConfig) {
  TRIB_REQUIRE_GPU();
  StagingConfig c;
  c.depth = 1;
  EXPECT_FALSE(StagingPipeline::create(c, nullptr));
  c.depth = 3;
  c.chunk_elements = 0;
  EXPECT_FALSE(StagingPipeline::create(c, nullptr));
  c.chunk_elements = 1000;
  c.codec.bucket = 3;
  c.codec.bits = 4;
  EXPECT_FALSE(StagingPipeline::create(c, nullptr));
}

}  // namespace
}  // namespace tributary::gpu
