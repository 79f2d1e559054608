// codec_bench: single-thread (per core) throughput of every codec, wire ratio, the top-k
// selection time on 100M floats, PowerSGD step time, and what zstd gains per stream type.
//
// GB/s counts the float32 tensor bytes (4 per element) on both sides: encode reads them,
// decode writes them, decode+acc reads and writes them (counted once). Each cell is the
// median of --iters runs on the same buffers (warm caches for the codec state, tensor far
// larger than the caches).
//
//   codec_bench [--elements N] [--topk-elements N] [--iters N]
//
// Output is Markdown, meant for bench/results/codecs_<date>.md.
#include <sys/utsname.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "compression/codec.h"
#include "compression/codec_registry.h"
#include "compression/counter_rng.h"
#include "compression/powersgd.h"
#include "compression/zstd_stage.h"

namespace {

using namespace tributary;
using namespace tributary::compression;
using Clock = std::chrono::steady_clock;

double median_seconds(int iters, const std::function<void()>& f) {
  std::vector<double> t;
  f();  // warm-up: page faults, thread_local scratch
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Gradient-like values: Gaussian bulk with a heavy (Laplace) tail in 1% of elements.
std::vector<float> gradient(std::size_t n, std::uint32_t seed) {
  std::vector<float> x(n);
  const RngKey k = rng_key(seed, 1, 2, 3);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = normal(gen);
    if (rng_bits(k, std::uint64_t{i}) % 100 == 0) x[i] *= 20.0f;
  }
  return x;
}

void check(const Status& s, const char* what) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 16u << 20;
  std::size_t topk_n = 100'000'000;
  int iters = 5;
  if (!tributary::bench::parse_flags(
          argc, argv, {{"--elements", &n}, {"--topk-elements", &topk_n}, {"--iters", &iters}},
          "codec_bench [--elements N] [--topk-elements N] [--iters N]"))
    return 2;
  utsname u{};
  uname(&u);
  __builtin_cpu_init();
  std::printf(
      "# codec_bench\n\nhost `%s`, kernel %s, CPU level %s, one thread; %zu float32 "
      "elements (%.0f MiB) per run, median of %d.\n\n",
      u.nodename, u.release,
      __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
      : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                                            : "baseline",
      n, n * 4.0 / (1 << 20), iters);

  const auto x = gradient(n, 1);
  std::vector<float> out(n), residual(n, 0.0f);
  std::printf("## Throughput per core\n\n");
  std::printf(
      "| codec | encode GB/s | decode GB/s | decode+acc GB/s | wire bytes/elem | ratio vs f32 |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  const char* specs[] = {"float32",
                         "float16",
                         "bfloat16",
                         "qint8:bucket=512",
                         "qint8:bucket=512,stochastic=0",
                         "qint4:bucket=512",
                         "sign:bucket=512",
                         "topk:density=0.01,warmup=0",
                         "topk:density=0.001,warmup=0",
                         "qint4:bucket=512,zstd"};
  for (const char* spec : specs) {
    for (bool ef : {false, true}) {
      auto codec = make_codec(spec);
      check(codec.status(), spec);
      const Codec& c = **codec;
      if (ef && c.id() != CodecId::kQInt8 && c.id() != CodecId::kTopK && c.id() != CodecId::kSign)
        continue;
      std::vector<std::byte> payload(c.max_encoded_bytes(n));
      std::size_t bytes = 0;
      std::uint64_t step = 0;
      const double te = median_seconds(iters, [&] {
        EncodeOptions o{.seed = 1, .step = step++};
        if (ef) o.residual = residual;
        auto r = c.encode(x.data(), DType::kFloat32, n, payload, o);
        check(r.status(), spec);
        bytes = *r;
      });
      const std::span<const std::byte> p(payload.data(), bytes);
      const double td = median_seconds(iters, [&] { check(c.decode(p, out.data(), n), spec); });
      const double ta =
          median_seconds(iters, [&] { check(c.decode_accumulate(p, out.data(), n), spec); });
      const double gb = n * 4.0 / 1e9;
      std::printf("| %s%s | %.2f | %.2f | %.2f | %.3f | %.1fx |\n", spec, ef ? " +EF" : "", gb / te,
                  gb / td, gb / ta, static_cast<double>(bytes) / n, n * 4.0 / bytes);
    }
  }

  std::printf("\n## Top-k on %zu floats (one thread)\n\n", topk_n);
  std::printf(
      "| density | encode ms (sample + gather pass + values) | nnz | k | wire MB "
      "|\n|---:|---:|---:|---:|---:|\n");
  {
    const auto big = gradient(topk_n, 2);
    for (double d : {0.01, 0.001}) {
      auto codec = make_codec("topk:warmup=0,density=" + std::to_string(d));
      check(codec.status(), "topk");
      std::vector<std::byte> payload((*codec)->max_encoded_bytes(topk_n));
      std::size_t bytes = 0;
      const double t = median_seconds(3, [&] {
        auto r = (*codec)->encode(big.data(), DType::kFloat32, topk_n, payload, {.seed = 3});
        check(r.status(), "topk");
        bytes = *r;
      });
      auto h = read_header(std::span<const std::byte>(payload.data(), bytes));
      std::printf("| %g | %.1f | %u | %.0f | %.2f |\n", d, t * 1e3, h->param, d * topk_n,
                  bytes / 1e6);
    }
    // The part DGC calls threshold estimation: one sampled quantile plus one counting pass.
    std::vector<std::uint32_t> sample(1 << 16);
    const RngKey k = rng_key(1, 0, 0, 0);
    const double ts = median_seconds(3, [&] {
      for (std::size_t j = 0; j < sample.size(); ++j) {
        const std::uint64_t idx = (std::uint64_t{rng_bits(k, std::uint64_t{j})} * topk_n) >> 32;
        sample[j] = std::bit_cast<std::uint32_t>(std::fabs(big[idx]));
      }
      std::nth_element(sample.begin(), sample.begin() + sample.size() * 99 / 100, sample.end());
    });
    std::printf("\nsampled threshold alone (65536 samples + nth_element): %.2f ms\n", ts * 1e3);
  }

  std::printf("\n## zstd on codec streams (%zu elements, stream bytes only)\n\n", n);
  std::printf(
      "| stream | bytes | zstd-1 ratio | zstd-1 MB/s | zstd-3 ratio | pays (>=10%%)? "
      "|\n|---|---:|---:|---:|---:|---|\n");
  auto stream_of = [&](const char* spec, std::size_t skip_scales) {
    auto codec = make_codec(spec);
    std::vector<std::byte> payload((*codec)->max_encoded_bytes(n));
    auto r = (*codec)->encode(x.data(), DType::kFloat32, n, payload, {.seed = 1});
    check(r.status(), spec);
    payload.resize(*r);
    return std::vector<std::byte>(payload.begin() + static_cast<std::ptrdiff_t>(skip_scales),
                                  payload.end());
  };
  struct Stream {
    const char* name;
    std::vector<std::byte> bytes;
  };
  const std::size_t nb = (n + 511) / 512;
  std::vector<Stream> streams;
  streams.push_back({"raw float32 gradient", stream_of("float32", 16)});
  streams.push_back({"bfloat16 values", stream_of("bfloat16", 16)});
  streams.push_back({"qint8 codes", stream_of("qint8:bucket=512", 16 + 4 * nb)});
  streams.push_back({"qint4 codes", stream_of("qint4:bucket=512", 16 + 4 * nb)});
  streams.push_back({"sign bits", stream_of("sign:bucket=512", 16 + 4 * nb)});
  {
    // Top-k: split index section and values.
    for (const char* spec : {"topk:density=0.01,warmup=0", "topk:density=0.3,warmup=0"}) {
      auto all = stream_of(spec, 0);
      std::uint32_t nnz, index_bytes, flags;
      std::memcpy(&nnz, all.data() + 8, 4);
      std::memcpy(&flags, all.data() + 12, 4);
      std::memcpy(&index_bytes, all.data() + 16, 4);
      const bool bitmap = (flags & 4u) != 0;
      streams.push_back({bitmap ? "top-k 30% bitmap indices" : "top-k 1% varint indices",
                         std::vector<std::byte>(all.begin() + 20, all.begin() + 20 + index_bytes)});
      if (!bitmap)
        streams.push_back(
            {"top-k 1% bf16 values",
             std::vector<std::byte>(all.begin() + 20 + ((index_bytes + 3) & ~3u), all.end())});
    }
  }
  for (const Stream& s : streams) {
    std::size_t z1 = 0;
    const double t1 = median_seconds(1, [&] { z1 = zstd_compressed_size(s.bytes, 1); });
    const std::size_t z3 = zstd_compressed_size(s.bytes, 3);
    const double r1 = static_cast<double>(s.bytes.size()) / z1;
    std::printf("| %s | %zu | %.2f | %.0f | %.2f | %s |\n", s.name, s.bytes.size(), r1,
                s.bytes.size() / t1 / 1e6, static_cast<double>(s.bytes.size()) / z3,
                z1 <= s.bytes.size() * 0.9 ? "yes" : "no");
  }

  std::printf("\n## PowerSGD (one worker, all-reduces not included)\n\n");
  std::printf("| matrix | rank | step ms | floats on wire | ratio |\n|---|---:|---:|---:|---:|\n");
  for (std::uint32_t rank : {1u, 4u}) {
    const std::size_t rows = 1024, cols = 1024;
    auto s = PowerSgd::create(rows * cols, {{0, rows, cols}}, {.rank = rank});
    check(s.status(), "powersgd");
    const auto g = gradient(rows * cols, 4);
    std::vector<float> p(s->p_count()), q(s->q_count()), dense(s->dense_count()), o(rows * cols);
    const double t = median_seconds(iters, [&] {
      s->compute_p(g.data(), p);
      s->orthogonalize(p);
      s->compute_q(p, q);
      s->pack_uncompressed(g.data(), dense);
      s->reconstruct(p, q, dense, o.data());
    });
    std::printf("| %zux%zu | %u | %.2f | %zu | %.0fx |\n", rows, cols, rank, t * 1e3,
                s->p_count() + s->q_count() + s->dense_count(), s->compression_ratio());
  }
  return 0;
}
