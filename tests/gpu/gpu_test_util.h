// Shared by the GPU tests: skip without a device (saying why), device buffers, and
// gradient-like test data generated in parallel (the 10^9-element cases).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compression/counter_rng.h"
#include "core/status.h"
#include "gpu/gpu_info.h"

namespace tributary::gpu::testing {

// GTEST_SKIP()s the calling test when no GPU is usable, with query_gpu()'s reason.
#define TRIB_REQUIRE_GPU()                                                          \
  do {                                                                              \
    const ::tributary::gpu::GpuInfo trib_gpu_ = ::tributary::gpu::query_gpu();      \
    if (!trib_gpu_.usable()) GTEST_SKIP() << "no usable GPU: " << trib_gpu_.reason; \
  } while (0)

#define TRIB_CUDA_OK(expr)                                                             \
  do {                                                                                 \
    const cudaError_t trib_rc_ = (expr);                                               \
    ASSERT_EQ(trib_rc_, cudaSuccess) << #expr << ": " << cudaGetErrorString(trib_rc_); \
  } while (0)

#define TRIB_OK(expr)                                      \
  do {                                                     \
    const ::tributary::Status trib_st_ = (expr);           \
    ASSERT_TRUE(trib_st_.is_ok()) << trib_st_.to_string(); \
  } while (0)

// Free device memory now, in bytes (0 when the query fails).
inline std::size_t device_free_bytes() {
  std::size_t free_bytes = 0, total = 0;
  return cudaMemGetInfo(&free_bytes, &total) == cudaSuccess ? free_bytes : 0;
}

// An owning device allocation of n elements of T (plus `slack` bytes, for misaligned views).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n, std::size_t slack = 0) : n_(n) {
    if (cudaMalloc(&p_, std::max<std::size_t>(n * sizeof(T) + slack, 1)) != cudaSuccess)
      p_ = nullptr;
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  T* get() const { return static_cast<T*>(p_); }
  bool ok() const { return p_ != nullptr; }
  std::size_t size() const { return n_; }
  void upload(const T* src, std::size_t n) const {
    ASSERT_EQ(cudaMemcpy(p_, src, n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download(std::size_t n) const {
    std::vector<T> out(n);
    if (n > 0) {
      EXPECT_EQ(cudaMemcpy(out.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

// Runs f(begin, end) over [0, n) on all cores.
template <typename F>
void parallel_for(std::size_t n, F f) {
  const std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads && t * per < n; ++t) {
    pool.emplace_back([&, t] { f(t * per, std::min(n, (t + 1) * per)); });
  }
  for (auto& th : pool) th.join();
}

// Gradient-like values, deterministic in (seed, index): a uniform bulk in (-1e-3, 1e-3),
// 1% of elements 50x larger, some exact zeros and a sprinkle of subnormals.
inline void fill_gradient(float* x, std::size_t n, std::uint64_t seed) {
  const compression::RngKey k = compression::rng_key(seed, 99, 0, 0);
  parallel_for(n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const std::uint32_t r = compression::rng_bits(k, std::uint64_t{i});
      float v = (static_cast<float>(r >> 8) * 0x1p-24f * 2.0f - 1.0f) * 1e-3f;
      if (r % 100 == 7) v *= 50.0f;
      if (r % 1000 == 3) v = 0.0f;
      if (r % 4096 == 5) v = (r & 0x80000u) ? 1e-40f : -3e-42f;
      x[i] = v;
    }
  });
}

inline std::vector<float> gradient(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n);
  fill_gradient(x.data(), n, seed);
  return x;
}

// Index of the first differing byte, or -1.
inline long long first_difference(const void* a, const void* b, std::size_t n) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  if (std::memcmp(pa, pb, n) == 0) return -1;
  for (std::size_t i = 0; i < n; ++i) {
    if (pa[i] != pb[i]) return static_cast<long long>(i);
  }
  return -1;
}

}  // namespace tributary::gpu::testing
