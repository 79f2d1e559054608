// gpu_bench: the CUDA codecs, reductions, top-k and the staging pipeline, against the
// goals of issue 6 on an H200 (HBM3e 4.8 TB/s by the datasheet):
//   - qint8/qint4 quantize and dequantize >= 60% of HBM, i.e. >= 2.8 TB/s effective,
//     counting bytes read + bytes written by the kernel;
//   - top-k 1% of 100M floats <= 1 ms;
//   - the staging pipeline hides >= 80% of its device-to-host copy behind a simulated
//     25 GB/s network.
//
// Kernel timings are CUDA events around `iters` back-to-back launches after warm-up (mean
// per launch). Top-k is host wall time per call (it synchronises: the caller sees that).
// The measured device-to-device copy (cudaMemcpy, read + write) is printed as the
// practical ceiling next to the datasheet's.
//
// Staging: send() over a tensor whose chunks go to a callback that busy-waits
// bytes / net_gbps (the simulated network). exposed = total - time inside the callback
// (the host waiting on the GPU: the pipeline fill and anything not overlapped);
// hidden = 1 - exposed / (sum of the D2H copy durations), clamped to [0, 1]. It counts
// the exposed encode of the first chunk against the copy, so it is conservative.
//
//   gpu_bench [--elements N] [--topk-elements N] [--iters N] [--chunk N] [--net-gbps G]
//
// Output is Markdown, meant for bench/results/gpu_<device>_<date>.md.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "compression/codec_registry.h"
#include "compression/counter_rng.h"
#include "gpu/device_codec.h"
#include "gpu/device_reduce.h"
#include "gpu/gpu_info.h"
#include "gpu/staging.h"

namespace {

using namespace tributary;
using namespace tributary::gpu;
using Clock = std::chrono::steady_clock;

constexpr double kHbmTBps = 4.8;  // H200 datasheet

void die(const char* what, const std::string& why) {
  std::fprintf(stderr, "gpu_bench: %s: %s\n", what, why.c_str());
  std::exit(1);
}
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) die(what, cudaGetErrorString(rc));
}
void check(const Status& s, const char* what) {
  if (!s.is_ok()) die(what, s.to_string());
}

template <typename T>
T* device_alloc(std::size_t n) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(n * sizeof(T), 1)), "cudaMalloc");
  return static_cast<T*>(p);
}

// Mean milliseconds per call of f over `iters` calls after 3 warm-ups, by CUDA events.
double time_kernel_ms(int iters, const std::function<void()>& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 3; ++i) f();
  check(cudaEventRecord(a), "record");
  for (int i = 0; i < iters; ++i) f();
  check(cudaEventRecord(b), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

// Median host wall milliseconds per call (f synchronises itself).
double time_wall_ms(int iters, const std::function<void()>& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto s = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void spin_for(double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
  }
}

// Gradient-like data on the device (uniform bulk, 1% large), generated on the host.
void fill(float* d, std::size_t n, std::uint64_t seed) {
  const compression::RngKey k = compression::rng_key(seed, 1, 2, 3);
  std::vector<float> h(std::min<std::size_t>(n, std::size_t{1} << 24));
  for (std::size_t done = 0; done < n; done += h.size()) {
    const std::size_t m = std::min(h.size(), n - done);
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t r = compression::rng_bits(k, std::uint64_t{done + i});
      h[i] = (static_cast<float>(r >> 8) * 0x1p-24f * 2.0f - 1.0f) * 1e-3f *
             (r % 100 == 0 ? 20.0f : 1.0f);
    }
    check(cudaMemcpy(d + done, h.data(), 4 * m, cudaMemcpyHostToDevice), "upload");
  }
}

void row(const char* what, double bytes, double ms, double ceiling_tbps) {
  const double tbps = bytes / (ms * 1e-3) / 1e12;
  std::printf("| %s | %.3f | %.1f | %.3f | %.0f%% | %.0f%% |\n", what, ms * 1e3, bytes / 1e9, tbps,
              100.0 * tbps / kHbmTBps, 100.0 * tbps / ceiling_tbps);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t{256} << 20;  // 1 GiB of float32
  std::size_t topk_n = 100'000'000;
  std::size_t chunk = std::size_t{4} << 20;
  double net_gbps = 25.0;
  int iters = 20;
  if (!tributary::bench::parse_flags(argc, argv,
                                     {{"--elements", &n},
                                      {"--topk-elements", &topk_n},
                                      {"--iters", &iters},
                                      {"--chunk", &chunk},
                                      {"--net-gbps", &net_gbps}},
                                     "gpu_bench [--elements N] [--topk-elements N] [--iters N] "
                                     "[--chunk N] [--net-gbps G]"))
    return 2;
  const GpuInfo info = query_gpu();
  if (!info.usable()) die("no usable GPU", info.reason);

  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::printf("# gpu_bench, %s\n\n", date);
  std::printf("Device: %s, %d SMs, %.0f MB L2, %.1f GiB, sm_%d%d; driver %d, runtime %d.\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6,
              prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor, driver, runtime);
  std::printf("Elements: %zu float32 (%.2f GiB); %d timed iterations after warm-up.\n\n", n,
              4.0 * n / 1073741824.0, iters);

  float* x = device_alloc<float>(n);
  float* y = device_alloc<float>(n);
  float* r = device_alloc<float>(n);
  fill(x, n, 1);
  check(cudaMemset(r, 0, 4 * n), "memset");
  const QIntParams q8{8, 512, true}, q4{4, 512, true};
  std::byte* payload = device_alloc<std::byte>(qint_payload_bytes(q8, n));

  // Ceiling: device-to-device copy.
  const double copy_ms = time_kernel_ms(
      iters, [&] { check(cudaMemcpyAsync(y, x, 4 * n, cudaMemcpyDeviceToDevice), "copy"); });
  const double ceiling = 8.0 * n / (copy_ms * 1e-3) / 1e12;
  std::printf("## Memory-bound kernels\n\n");
  std::printf(
      "Goal: quantize and dequantize >= 2.8 TB/s (60%% of %.1f TB/s). Measured copy ceiling: %.3f "
      "TB/s.\n\n",
      kHbmTBps, ceiling);
  std::printf(
      "| kernel | us | GB moved | TB/s | of HBM | of copy |\n|---|---:|---:|---:|---:|---:|\n");
  row("cudaMemcpy D2D", 8.0 * n, copy_ms, ceiling);
  for (const QIntParams& p : {q8, q4}) {
    const double wire = static_cast<double>(qint_payload_bytes(p, n));
    const std::string name = p.bits == 8 ? "qint8" : "qint4";
    DeviceEncodeOptions o;
    o.seed = 7;
    const double enc = time_kernel_ms(
        iters, [&] { check(qint_encode(x, n, p, o, payload, nullptr, nullptr), "encode"); });
    row((name + " quantize (stochastic, bucket 512)").c_str(), 4.0 * n + wire, enc, ceiling);
    DeviceEncodeOptions ef = o;
    ef.residual = r;
    const double enc_ef = time_kernel_ms(
        iters, [&] { check(qint_encode(x, n, p, ef, payload, nullptr, nullptr), "encode"); });
    row((name + " quantize + error feedback").c_str(), 12.0 * n + wire, enc_ef, ceiling);
    check(qint_encode(x, n, p, o, payload, nullptr, nullptr), "encode");
    compression::PayloadHeader h;
    h.codec = p.bits == 8 ? compression::CodecId::kQInt8 : compression::CodecId::kQInt4;
    h.count = static_cast<std::uint32_t>(n);
    h.param = p.bucket;
    const double dec = time_kernel_ms(
        iters, [&] { check(qint_decode(h, payload, y, n, false, nullptr), "decode"); });
    row((name + " dequantize").c_str(), wire + 4.0 * n, dec, ceiling);
    const double acc = time_kernel_ms(
        iters, [&] { check(qint_decode(h, payload, y, n, true, nullptr), "decode"); });
    row((name + " dequantize + accumulate").c_str(), wire + 8.0 * n, acc, ceiling);
  }
  {
    const double ms = time_kernel_ms(iters, [&] {
      check(reduce_into(y, x, n, DType::kFloat32, ReduceOp::kSum, nullptr), "reduce");
    });
    row("reduce float32 sum (dst += src)", 12.0 * n, ms, ceiling);
    const double bf = time_kernel_ms(iters, [&] {
      check(reduce_into(y, x, 2 * n, DType::kBFloat16, ReduceOp::kSum, nullptr), "reduce");
    });
    row("reduce bfloat16 sum (2N elements)", 12.0 * n, bf, ceiling);
    const double mx = time_kernel_ms(iters, [&] {
      check(reduce_into(y, x, n, DType::kFloat32, ReduceOp::kMax, nullptr), "reduce");
    });
    row("reduce float32 max", 12.0 * n, mx, ceiling);
  }
  const QIntParams big{8, 65536, true};
  const double enc_big = time_kernel_ms(
      iters, [&] { check(qint_encode(x, n, big, {}, payload, nullptr, nullptr), "encode"); });
  row("qint8 quantize, bucket 65536 (two-pass path)", 4.0 * n + qint_payload_bytes(big, n), enc_big,
      ceiling);
  cudaFree(payload);

  // Top-k.
  std::printf(
      "\n## Top-k\n\nGoal: 1%% of 100M floats <= 1 ms. %zu elements, wall time per call "
      "(median).\n\n",
      topk_n);
  if (topk_n > n) die("topk", "--topk-elements must be <= --elements");
  {
    auto cfg = compression::parse_codec_spec("topk:density=0.01,warmup=0");
    TopKEncoder enc;
    const std::size_t cap = TopKEncoder::max_payload_bytes(*cfg, topk_n);
    std::byte* out = device_alloc<std::byte>(cap);
    std::size_t bytes = 0;
    const double e = time_wall_ms(iters, [&] {
      auto b = enc.encode(x, topk_n, *cfg, {}, out, cap, nullptr);
      check(b.status(), "topk encode");
      bytes = *b;
      check(cudaDeviceSynchronize(), "sync");
    });
    DeviceEncodeOptions ef;
    ef.residual = r;
    check(cudaMemset(r, 0, 4 * topk_n), "memset");
    const double eef = time_wall_ms(iters, [&] {
      check(enc.encode(x, topk_n, *cfg, ef, out, cap, nullptr).status(), "topk encode");
      check(cudaDeviceSynchronize(), "sync");
    });
    const std::size_t k = topk_n / 100;
    const std::size_t kcap = static_cast<std::size_t>(std::ceil(1.5 * 0.01 * topk_n)) + 1;
    auto* idx = device_alloc<std::uint32_t>(std::max(kcap, k));
    std::size_t kept = 0;
    const double sel = time_wall_ms(iters, [&] {
      auto s =
          enc.select_sampled(x, topk_n, k, kcap, compression::rng_key(1, 2, 3, 4), idx, nullptr);
      check(s.status(), "select");
      kept = *s;
      check(cudaDeviceSynchronize(), "sync");
    });
    const double ex = time_wall_ms(std::max(3, iters / 5), [&] {
      check(enc.select_exact(x, topk_n, k, idx, nullptr).status(), "exact");
      check(cudaDeviceSynchronize(), "sync");
    });
    std::printf("| operation | ms | note |\n|---|---:|---|\n");
    std::printf(
        "| encode (sampled threshold + compaction + varint/values) | %.3f | %zu payload bytes |\n",
        e, bytes);
    std::printf("| encode with error feedback | %.3f | |\n", eef);
    std::printf("| selection only (select_sampled) | %.3f | kept %zu for k = %zu |\n", sel, kept,
                k);
    std::printf("| exact top-k (full radix sort, reference) | %.3f | |\n", ex);
    cudaFree(idx);
    cudaFree(out);
  }

  // Staging pipeline.
  std::printf("\n## Staging pipeline (qint8, bucket 512)\n\n");
  std::printf(
      "Goal: >= 80%% of the D2H copy hidden behind a simulated %.0f GB/s network. %zu elements in "
      "chunks of %zu.\n\n",
      net_gbps, n, chunk);
  {
    // Pinned D2H bandwidth alone, for reference.
    const std::size_t bytes = qint_payload_bytes(q8, chunk);
    void* pinned = nullptr;
    check(cudaMallocHost(&pinned, bytes), "pinned");
    const double d2h = time_kernel_ms(
        iters, [&] { check(cudaMemcpyAsync(pinned, x, bytes, cudaMemcpyDeviceToHost), "d2h"); });
    std::printf("Pinned D2H of one chunk payload (%.1f MB): %.1f GB/s.\n\n", bytes / 1e6,
                bytes / (d2h * 1e-3) / 1e9);
    cudaFreeHost(pinned);
  }
  std::printf(
      "| direction | depth | chunks | total ms | network ms | copy ms | codec ms | exposed ms | "
      "copy hidden |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<std::vector<std::byte>> wire;
  for (int depth : {2, 3}) {
    StagingConfig cfg;
    cfg.codec = q8;
    cfg.chunk_elements = chunk;
    cfg.depth = depth;
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    auto pipe = StagingPipeline::create(cfg, stream);
    check(pipe.status(), "pipeline");
    bool keep = wire.empty();  // the first warm-up keeps the payloads for the receive runs
    auto send = [&](std::span<const std::byte> p) {
      const auto t = Clock::now();
      if (keep) wire.emplace_back(p.begin(), p.end());
      const double left =
          p.size() / (net_gbps * 1e9) - std::chrono::duration<double>(Clock::now() - t).count();
      if (left > 0) spin_for(left);
      return Status::ok();
    };
    check((*pipe)->send(x, n, {}, send), "send");  // warm-up (and the payloads for receive)
    keep = false;
    auto report = [&](const char* dir, const StagingStats& s) {
      const double exposed = std::max(0.0, s.total_ms - s.callback_ms);
      const double hidden = s.copy_ms > 0 ? std::clamp(1.0 - exposed / s.copy_ms, 0.0, 1.0) : 0.0;
      std::printf("| %s | %d | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f%% |\n", dir, depth,
                  s.chunks, s.total_ms, s.callback_ms, s.copy_ms, s.codec_ms, exposed,
                  100.0 * hidden);
    };
    check((*pipe)->send(x, n, {}, send), "send");
    report("send (encode, D2H, network)", (*pipe)->last_stats());
    std::size_t next = 0;
    auto recv = [&](std::span<std::byte> buf) -> Result<std::size_t> {
      const auto t = Clock::now();
      const auto& p = wire[next++ % wire.size()];
      std::memcpy(buf.data(), p.data(), p.size());
      const double left =
          p.size() / (net_gbps * 1e9) - std::chrono::duration<double>(Clock::now() - t).count();
      if (left > 0) spin_for(left);
      return p.size();
    };
    check((*pipe)->receive_accumulate(y, n, recv), "receive");
    next = 0;
    check((*pipe)->receive_accumulate(y, n, recv), "receive");
    report("receive (network, H2D, decode-accumulate)", (*pipe)->last_stats());
    pipe->reset();
    cudaStreamDestroy(stream);
  }
  std::printf(
      "\nexposed = total - network (host waiting on the GPU); copy hidden = 1 - exposed / copy.\n");
  cudaFree(x);
  cudaFree(y);
  cudaFree(r);
  return 0;
}
