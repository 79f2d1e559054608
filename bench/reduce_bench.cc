// reduce_bench: bandwidth of the element-wise reduction kernels (reduce_into) per dtype,
// op and buffer size, next to memcpy on the same buffers in the same run, so a kernel can
// be judged against what the memory system delivers rather than against a guess.
//
// Bytes counted per element: two reads and one write (dst = dst op src); memcpy counts one
// read and one write. Each cell is the median of --iters timed samples; a sample repeats
// the kernel until about 256 MiB have moved, so small (in-cache) sizes are not timer noise.
//
//   reduce_bench [--min-bytes N] [--max-bytes N] [--iters N] [--dtypes f32,bf16,...]
//
// N accepts K/M/G suffixes (powers of 1024). Output is a Markdown table.
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/reduce.h"

namespace {

using tributary::DType;
using tributary::ReduceOp;

struct Options {
  std::size_t min_bytes = 32u << 10;
  std::size_t max_bytes = 64u << 20;
  int iters = 5;
  std::vector<DType> dtypes;  // empty: all
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "reduce_bench: %s\n"
               "usage: reduce_bench [--min-bytes N] [--max-bytes N] [--iters N] "
               "[--dtypes f32,f16,...]\n",
               msg);
  std::exit(2);
}

std::size_t parse_bytes(std::string_view s) {
  if (s.empty()) usage("empty size");
  std::size_t mult = 1;
  switch (s.back()) {
    case 'k':
    case 'K':
      mult = 1u << 10;
      s.remove_suffix(1);
      break;
    case 'm':
    case 'M':
      mult = 1u << 20;
      s.remove_suffix(1);
      break;
    case 'g':
    case 'G':
      mult = 1u << 30;
      s.remove_suffix(1);
      break;
    default: break;
  }
  char* end = nullptr;
  const std::string str(s);
  const unsigned long long v = std::strtoull(str.c_str(), &end, 10);
  if (str.empty() || *end != '\0' || v == 0) usage("bad size");
  return static_cast<std::size_t>(v) * mult;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) usage("missing value");
      return argv[++i];
    };
    if (arg == "--min-bytes") {
      o.min_bytes = parse_bytes(value());
    } else if (arg == "--max-bytes") {
      o.max_bytes = parse_bytes(value());
    } else if (arg == "--iters") {
      o.iters = std::atoi(std::string(value()).c_str());
      if (o.iters < 1) usage("--iters must be >= 1");
    } else if (arg == "--dtypes") {
      std::string_view list = value();
      while (!list.empty()) {
        const auto comma = list.find(',');
        const auto name = list.substr(0, comma);
        const auto t = tributary::parse_dtype(name);
        if (!t) usage("unknown dtype");
        o.dtypes.push_back(*t);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      }
    } else {
      usage("unknown flag");
    }
  }
  if (o.min_bytes > o.max_bytes) usage("--min-bytes > --max-bytes");
  if (o.dtypes.empty()) {
    for (int t = 0; t < tributary::kNumDTypes; ++t) o.dtypes.push_back(static_cast<DType>(t));
  }
  return o;
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, AlignedFree>;

Buffer alloc(std::size_t bytes) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (p == nullptr) usage("out of memory");
  return Buffer(static_cast<std::byte*>(p));
}

// Values that stay normal (no subnormal slow paths, no overflow) under repeated sum/min/max.
void fill(std::byte* p, std::size_t bytes, DType t, bool dst) {
  const std::size_t n = bytes / tributary::dtype_size(t);
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = (dst ? 1.0f : 0.0009765625f) * float(1 + i % 7);
  switch (t) {
    case DType::kFloat32: std::memcpy(p, f.data(), n * 4); break;
    case DType::kFloat64:
      for (std::size_t i = 0; i < n; ++i) reinterpret_cast<double*>(p)[i] = f[i];
      break;
    case DType::kFloat16: tributary::float_to_half(f.data(), p, n); break;
    case DType::kBFloat16: tributary::float_to_bfloat16(f.data(), p, n); break;
    default:
      for (std::size_t i = 0; i < bytes; ++i) p[i] = std::byte(i % 7 + 1);
      break;
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median over `iters` samples of GB/s; `body` runs once per call, moving `bytes_per_call`.
template <typename F>
double measure(int iters, std::size_t bytes_per_call, F&& body) {
  constexpr double kBytesPerSample = 256.0 * (1 << 20);
  const int reps = std::max(1, static_cast<int>(kBytesPerSample / double(bytes_per_call)));
  body();  // warm-up: page faults, caches, ifunc binding
  std::vector<double> gbps;
  for (int it = 0; it < iters; ++it) {
    const double t0 = now_s();
    for (int r = 0; r < reps; ++r) body();
    const double dt = now_s() - t0;
    gbps.push_back(double(bytes_per_call) * reps / dt / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

// Defeats dead-store elimination of the memcpy loop.
volatile unsigned char g_sink;

std::string size_label(std::size_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0) {
    std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  } else if (b >= (1u << 10) && b % (1u << 10) == 0) {
    std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", b);
  }
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

// Mirrors the order of the target_clones list in core/reduce.cc.
const char* selected_clone() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "arch=x86-64-v4 (AVX-512)";
  if (__builtin_cpu_supports("x86-64-v3")) return "arch=x86-64-v3 (AVX2+F16C+FMA)";
  return "default (x86-64 baseline, SSE2)";
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);

  std::vector<std::size_t> sizes;
  for (std::size_t b = opt.min_bytes; b < opt.max_bytes; b *= 4) sizes.push_back(b);
  sizes.push_back(opt.max_bytes);

  __builtin_cpu_init();
  utsname un{};
  uname(&un);
  double load[1] = {0};
  getloadavg(load, 1);
  std::printf("# reduce_bench\n\n");
  std::printf("- cpu: %s (%s)\n", cpu_model().c_str(), un.machine);
  std::printf("- cpu features: avx512f=%d avx2=%d f16c=%d avx512fp16=%d avx512bf16=%d\n",
              __builtin_cpu_supports("avx512f") ? 1 : 0, __builtin_cpu_supports("avx2") ? 1 : 0,
              __builtin_cpu_supports("f16c") ? 1 : 0, __builtin_cpu_supports("avx512fp16") ? 1 : 0,
              __builtin_cpu_supports("avx512bf16") ? 1 : 0);
  std::printf("- multiversion selected: %s\n", selected_clone());
  std::printf("- compiler: GCC %s\n", __VERSION__);
  std::printf("- load average at start: %.2f\n", load[0]);
  std::printf(
      "- method: reduce_into(dst, src) GB/s counting 2 reads + 1 write per element; "
      "memcpy(dst, src) counting 1 read + 1 write; same buffers; median of %d "
      "samples of ~256 MiB each. Cell: GB/s (fraction of memcpy at that size).\n\n",
      opt.iters);

  const std::size_t max_alloc = sizes.back();
  Buffer dst = alloc(max_alloc);
  Buffer src = alloc(max_alloc);

  std::vector<double> memcpy_gbps;
  for (std::size_t b : sizes) {
    std::memset(dst.get(), 1, b);
    std::memset(src.get(), 2, b);
    memcpy_gbps.push_back(measure(opt.iters, 2 * b, [&] {
      std::memcpy(dst.get(), src.get(), b);
      g_sink = static_cast<unsigned char>(dst.get()[b - 1]);
    }));
  }

  std::printf("| kernel |");
  for (std::size_t b : sizes) std::printf(" %s |", size_label(b).c_str());
  std::printf("\n|---|");
  for (std::size_t i = 0; i < sizes.size(); ++i) std::printf("---:|");
  std::printf("\n| memcpy |");
  for (double g : memcpy_gbps) std::printf(" %.1f |", g);
  std::printf("\n");
  std::fflush(stdout);

  for (DType t : opt.dtypes) {
    std::vector<ReduceOp> ops = {ReduceOp::kSum};
    if (t == DType::kFloat32) {
      ops.push_back(ReduceOp::kMin);
      ops.push_back(ReduceOp::kMax);
    }
    const std::size_t esize = tributary::dtype_size(t);
    for (ReduceOp op : ops) {
      std::printf("| %s %s |", std::string(tributary::to_string(t)).c_str(),
                  std::string(tributary::to_string(op)).c_str());
      for (std::size_t si = 0; si < sizes.size(); ++si) {
        const std::size_t n = sizes[si] / esize;
        fill(dst.get(), n * esize, t, true);
        fill(src.get(), n * esize, t, false);
        const double g = measure(opt.iters, 3 * n * esize,
                                 [&] { tributary::reduce_into(dst.get(), src.get(), n, t, op); });
        std::printf(" %.1f (%.2f) |", g, g / memcpy_gbps[si]);
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
  getloadavg(load, 1);
  std::printf("\n- load average at end: %.2f\n", load[0]);
  return 0;
}
