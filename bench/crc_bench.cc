// crc_bench: throughput of the data plane's CRC-32C (core/crc32c.h: the engine it chose, and
// each engine alone) per buffer size, next
// to memcpy on the same buffer in the same run, so the checksum's cost can be read against
// what the memory system delivers. Each cell is the median of --iters samples; a sample
// repeats the call until about 1 GiB has been read (64 MiB for the slow reference), so small
// (in-cache) sizes are not timer noise. Output is a Markdown table.
//
//   crc_bench [--iters N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/crc32c.h"

namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

// `budget`: bytes one sample reads.
template <typename Fn>
double median_gbps(std::size_t bytes, int iters, std::size_t budget, Fn&& fn) {
  const std::size_t reps = std::max<std::size_t>(1, budget / bytes);
  std::vector<double> gbps;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t r = 0; r < reps; ++r) fn(r);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(static_cast<double>(bytes * reps) / s / 1e9);
  }
  std::nth_element(gbps.begin(), gbps.begin() + iters / 2, gbps.end());
  return gbps[static_cast<std::size_t>(iters / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: crc_bench [--iters N]\n");
      return 2;
    }
  }
  std::printf("crc32c engine chosen on this CPU: %s\n\n", tributary::crc32c_engine());
  std::printf(
      "| size | crc32c GB/s | ISA-L GB/s | folding GB/s | reference (tables) GB/s | memcpy GB/s "
      "|\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{256} << 10, std::size_t{4} << 20,
                            std::size_t{64} << 20, std::size_t{256} << 20}) {
    std::vector<std::byte> src(bytes), dst(bytes);
    for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<std::byte>(i * 131 + 7);
    volatile std::uint32_t sink = 0;
    const double fast = median_gbps(bytes, iters, kGiB, [&](std::size_t r) {
      sink = sink ^ tributary::crc32c(src, static_cast<std::uint32_t>(r));
    });
    const double isal = median_gbps(bytes, iters, kGiB, [&](std::size_t r) {
      sink = sink ^ tributary::crc32c_isal(src, static_cast<std::uint32_t>(r));
    });
    const double fold = median_gbps(bytes, iters, kGiB, [&](std::size_t r) {
      sink = sink ^ tributary::crc32c_folded(src, static_cast<std::uint32_t>(r));
    });
    // The table-driven reference is far slower: a smaller budget keeps the run short.
    const double ref = median_gbps(bytes, std::min(iters, 3), kGiB / 16, [&](std::size_t r) {
      sink = sink ^ tributary::crc32c_reference(src, static_cast<std::uint32_t>(r));
    });
    const double copy = median_gbps(bytes, iters, kGiB, [&](std::size_t r) {
      std::memcpy(dst.data(), src.data(), bytes);
      sink = sink ^ static_cast<std::uint32_t>(dst[r % bytes]);
    });
    std::printf("| %zu KiB | %.1f | %.1f | %.1f | %.2f | %.1f |\n", bytes >> 10, fast, isal, fold,
                ref, copy);
  }
  return 0;
}
