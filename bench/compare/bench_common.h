// Shared pieces of the comparison benchmarks (Open MPI, Gloo; Tributary's own
// `tributary bench` prints the same rows). What is shared:
//   * the command line (nccl-tests style: -b/-e/-f/-n/-w, long forms too),
//     parsed once into a SweepOptions;
//   * the size sweep (min..max by factor, rounded down to whole floats);
//   * the check pattern: small integers, so the float32 sum over ranks is exact
//     and every element can be compared with ==;
//   * the output rows, which bench/compare/aggregate.py parses:
//       # <system> allreduce np=<N> ...
//       #       size        count    type   redop        algo     time_us  algbw(GB/s)  busbw(GB/s)
//       #wrong
//     time_us is the average over timed iterations, max over ranks;
//     algbw = bytes / time; busbw = algbw * 2(n-1)/n (all-reduce).
// Header-only so the two benchmarks stay one file each plus this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::bench {

struct SweepOptions {
  std::size_t min_bytes = 4096;
  std::size_t max_bytes = 16u << 20;
  std::size_t factor = 16;
  int iters = 20;
  int warmup = 5;
  // Gloo only (ignored by MPI): rank, world size, rendezvous directory,
  // comma-separated algorithm list, per-operation timeout.
  int rank = -1;
  int size = -1;
  std::string store_dir;
  std::string algos;
  int timeout_s = 120;
};

// "4096", "64K", "16M", "1G" (binary units).
inline std::size_t ParseBytes(std::string_view s) {
  if (s.empty()) throw std::invalid_argument("empty size");
  std::size_t mult = 1;
  switch (s.back()) {
    case 'k':
    case 'K': mult = std::size_t{1} << 10; break;
    case 'm':
    case 'M': mult = std::size_t{1} << 20; break;
    case 'g':
    case 'G': mult = std::size_t{1} << 30; break;
    default: break;
  }
  if (mult != 1) s.remove_suffix(1);
  return std::stoull(std::string(s)) * mult;
}

[[noreturn]] inline void Usage(const char* prog, const std::string& why) {
  std::fprintf(stderr,
               "%s: %s\n"
               "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n|--iters N] "
               "[-w|--warmup N]\n"
               "          [--rank R --size N --store DIR [--algos a,b] "
               "[--timeout S]]   (gloo)\n",
               prog, why.c_str(), prog);
  std::exit(2);
}

inline SweepOptions ParseArgs(int argc, char** argv) {
  SweepOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) Usage(argv[0], "missing value for " + std::string(a));
    const std::string_view v = argv[++i];
    try {
      if (a == "-b" || a == "--minbytes")
        o.min_bytes = ParseBytes(v);
      else if (a == "-e" || a == "--maxbytes")
        o.max_bytes = ParseBytes(v);
      else if (a == "-f" || a == "--stepfactor")
        o.factor = std::stoull(std::string(v));
      else if (a == "-n" || a == "--iters")
        o.iters = std::stoi(std::string(v));
      else if (a == "-w" || a == "--warmup")
        o.warmup = std::stoi(std::string(v));
      else if (a == "--rank")
        o.rank = std::stoi(std::string(v));
      else if (a == "--size" || a == "--np")
        o.size = std::stoi(std::string(v));
      else if (a == "--store")
        o.store_dir = v;
      else if (a == "--algos")
        o.algos = v;
      else if (a == "--timeout")
        o.timeout_s = std::stoi(std::string(v));
      else
        Usage(argv[0], "unknown flag " + std::string(a));
    } catch (const std::logic_error&) {
      Usage(argv[0], "bad value for " + std::string(a) + ": " + std::string(v));
    }
  }
  if (o.min_bytes < sizeof(float) || o.max_bytes < o.min_bytes)
    Usage(argv[0], "need 4 <= min bytes <= max bytes");
  if (o.factor < 2) Usage(argv[0], "factor must be >= 2");
  if (o.iters < 1 || o.warmup < 0) Usage(argv[0], "need iters >= 1, warmup >= 0");
  return o;
}

// Sizes in bytes, each a whole number of float32 elements.
inline std::vector<std::size_t> SweepSizes(const SweepOptions& o) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor)
    sizes.push_back(s / sizeof(float) * sizeof(float));
  return sizes;
}

// Small positive integers that depend on rank and index, so a chunk that
// lands at the wrong offset or misses a rank's contribution is caught.
inline float PatternValue(int rank, std::size_t i) {
  return static_cast<float>((i * 7 + static_cast<std::size_t>(rank) * 3) % 31 + 1);
}

inline void FillPattern(std::span<float> buf, int rank) {
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = PatternValue(rank, i);
}

// Elements of an all-reduce(sum) result that differ from the exact sum.
inline std::int64_t CountWrong(std::span<const float> result, int nranks) {
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < result.size(); ++i) {
    float expect = 0.0f;
    for (int r = 0; r < nranks; ++r) expect += PatternValue(r, i);
    if (result[i] != expect) ++wrong;
  }
  return wrong;
}

inline void PrintColumnHeader() {
  std::printf(
      "#       size        count    type   redop        algo     time_us"
      "  algbw(GB/s)  busbw(GB/s)  #wrong\n");
}

inline void PrintRow(std::size_t bytes, int nranks, const char* algo, double seconds,
                     std::int64_t wrong) {
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  const double busbw = algbw * 2.0 * (nranks - 1) / nranks;
  std::printf("%12zu %12zu %7s %7s %11s %11.2f %12.3f %12.3f %7lld\n", bytes, bytes / sizeof(float),
              "float", "sum", algo, seconds * 1e6, algbw, busbw, static_cast<long long>(wrong));
  std::fflush(stdout);
}

}  // namespace tributary::bench
