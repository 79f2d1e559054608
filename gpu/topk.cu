// Top-k on the GPU (gpu/device_codec.h): compression/topk.cc's selection and wire format,
// step for step, so the payload is byte-identical to the CPU encoder's.
//
// Selection: the sample (|v| bits at RNG-chosen indices) is radix-sorted once; each round
// reads its quantile straight from the sorted sample on the device, and one pass over the
// tensor (cub::DeviceSelect, order-preserving compaction of the indices with |v| >= t)
// both counts and gathers. The output iterator drops indices past the scratch capacity
// (the CPU's cap, 1.5k + 1), so a round whose threshold is far too low costs a pass but
// no memory; later rounds count first (one read) and gather only when in range, as the
// CPU does. A candidate set above the cap is cut to exactly k by a stable descending
// radix sort on |v| (ties keep index order, as the CPU's comparator) and re-sorted by
// index. One host synchronisation per round, one for the index format.
//
// Encoding: varint lengths and their total (one pass over the k indices), bitmap when it
// is not larger, else an exclusive scan of the lengths and a parallel varint write; the
// values are narrowed with core's round-to-nearest-even converters (device ports).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include "gpu/cuda_status.h"
#include "gpu/device_codec.h"
#include "gpu/device_math.cuh"

namespace tributary::gpu {
namespace {

using compression::CodecConfig;
using compression::CodecId;
using compression::RngKey;

constexpr unsigned kThreads = 256;
constexpr std::size_t kTopKHeader = compression::kHeaderBytes + 4;
constexpr std::uint32_t kValuesF16 = 1;
constexpr std::uint32_t kIndexBitmap = 1u << 2;

std::uint64_t pad4(std::uint64_t n) { return (n + 3) & ~std::uint64_t{3}; }
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The CPU codec's k and cap (compression/topk.cc).
std::size_t target_k(std::size_t count, double density) {
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(density * count)), 1, count);
}
std::size_t max_nnz(std::size_t count, double density) {
  const std::size_t cap = static_cast<std::size_t>(std::ceil(1.5 * density * count)) + 1;
  return std::min(count, cap);
}

// Device words shared with the host (one small allocation).
struct Counters {
  unsigned long long selected;  // DeviceSelect's count, or count_ge's
  unsigned long long varint_bytes;
  std::uint32_t t;  // this round's threshold (|v| bits)
};

// Output iterator for DeviceSelect that stores only the first `cap` selections; the
// selection count still covers them all.
struct BoundedOut {
  using iterator_category = std::random_access_iterator_tag;
  using value_type = std::uint32_t;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  struct reference {
    std::uint32_t* p;
    difference_type i;
    difference_type cap;
    __device__ reference& operator=(std::uint32_t v) {
      if (i < cap) p[i] = v;
      return *this;
    }
  };
  std::uint32_t* p;
  difference_type pos;
  difference_type cap;
  __host__ __device__ BoundedOut operator+(difference_type d) const { return {p, pos + d, cap}; }
  __device__ reference operator*() const { return {p, pos, cap}; }
};

struct AtLeast {
  const float* v;
  const std::uint32_t* t;
  __device__ bool operator()(std::uint32_t i) const { return detail::abs_bits(v[i]) >= *t; }
};

__global__ void add_residual_kernel(float* r, const float* x, std::uint64_t n) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    r[i] = __fadd_rn(x[i], r[i]);
  }
}

__global__ void momentum_kernel(float* u, float* r, const float* x, std::uint64_t n, float m) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float ui = __fadd_rn(__fmul_rn(m, u[i]), x[i]);
    u[i] = ui;
    r[i] = __fadd_rn(r[i], ui);
  }
}

// sample[j] = |v| bits at (bits(j) * n) >> 32, or at j when the sample covers the tensor.
__global__ void sample_kernel(const float* v, std::uint64_t n, std::uint64_t s, bool exact,
                              std::uint32_t k0, std::uint32_t k1, std::uint32_t* sample) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < s; j += stride) {
    const std::uint64_t i =
        exact ? j
              : (std::uint64_t{detail::rng_bits(k0, k1, static_cast<std::uint32_t>(j),
                                                static_cast<std::uint32_t>(j >> 32))} *
                 n) >>
                    32;
    sample[j] = detail::abs_bits(v[i]);
  }
}

__global__ void threshold_kernel(const std::uint32_t* sorted, std::uint64_t pos, Counters* c) {
  c->t = max(sorted[pos], 1u);  // never send exact zeros
  c->selected = 0;
}

__device__ unsigned long long block_sum(unsigned long long x) {
  __shared__ unsigned long long partial[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) x += __shfl_down_sync(0xffffffffu, x, o);
  if ((threadIdx.x & 31u) == 0) partial[threadIdx.x >> 5] = x;
  __syncthreads();
  x = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0ull;
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o /= 2) x += __shfl_down_sync(0xffffffffu, x, o);
  }
  __syncthreads();
  return x;  // valid in thread 0
}

// c->selected += #{i : |v[i]| bits >= c->t}; 16-byte loads when aligned.
__global__ void __launch_bounds__(kThreads)
    count_kernel(const float* v, std::uint64_t n, bool vec, Counters* c) {
  const std::uint32_t t = c->t;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  const std::uint64_t start = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned long long mine = 0;
  std::uint64_t scalar_from = 0;
  if (vec) {
    const std::uint64_t groups = n / 4;
#pragma unroll 4
    for (std::uint64_t g = start; g < groups; g += stride) {
      const float4 x = reinterpret_cast<const float4*>(v)[g];
      mine += (detail::abs_bits(x.x) >= t) + (detail::abs_bits(x.y) >= t) +
              (detail::abs_bits(x.z) >= t) + (detail::abs_bits(x.w) >= t);
    }
    scalar_from = groups * 4;
  }
  for (std::uint64_t i = scalar_from + start; i < n; i += stride)
    mine += detail::abs_bits(v[i]) >= t;
  mine = block_sum(mine);
  if (threadIdx.x == 0 && mine != 0) atomicAdd(&c->selected, mine);
}

__global__ void keys_kernel(const float* v, const std::uint32_t* idx, std::uint64_t m,
                            std::uint32_t* keys) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < m; j += stride) {
    keys[j] = detail::abs_bits(v[idx == nullptr ? j : idx[j]]);
  }
}

__global__ void iota_kernel(std::uint32_t* out, std::uint64_t n) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += stride) {
    out[j] = static_cast<std::uint32_t>(j);
  }
}

__device__ __forceinline__ std::uint32_t delta_at(const std::uint32_t* idx, std::uint64_t j) {
  return j == 0 ? idx[0] : idx[j] - idx[j - 1] - 1;
}

__device__ __forceinline__ std::uint32_t varint_len(std::uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}

__global__ void __launch_bounds__(kThreads)
    varint_len_kernel(const std::uint32_t* idx, std::uint64_t m, std::uint32_t* lens, Counters* c) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  unsigned long long mine = 0;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < m; j += stride) {
    const std::uint32_t len = varint_len(delta_at(idx, j));
    lens[j] = len;
    mine += len;
  }
  mine = block_sum(mine);
  if (threadIdx.x == 0 && mine != 0) atomicAdd(&c->varint_bytes, mine);
}

__global__ void varint_write_kernel(const std::uint32_t* idx, const std::uint32_t* offs,
                                    std::uint64_t m, std::uint8_t* out) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < m; j += stride) {
    std::uint32_t d = delta_at(idx, j);
    std::uint8_t* p = out + offs[j];
    while (d >= 0x80u) {
      *p++ = static_cast<std::uint8_t>((d & 0x7fu) | 0x80u);
      d >>= 7;
    }
    *p = static_cast<std::uint8_t>(d);
  }
}

__global__ void bitmap_kernel(const std::uint32_t* idx, std::uint64_t m, std::uint32_t* words) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < m; j += stride) {
    const std::uint32_t i = idx[j];
    atomicOr(words + i / 32, 1u << (i % 32));
  }
}

struct Head {
  std::uint32_t w[5];  // the 16-byte header and the u32 index length
};

// The header, the values (narrowed to 16 bits) and the error-feedback update at sent
// positions: r = v - wire_value(v), u = 0.
__global__ void values_kernel(Head head, std::uint32_t* out_words, const float* v,
                              const std::uint32_t* idx, std::uint64_t m, bool f16,
                              std::uint16_t* values, float* r, float* u) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
#pragma unroll
    for (int w = 0; w < 5; ++w) out_words[w] = head.w[w];
  }
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t j = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < m; j += stride) {
    const std::uint32_t i = idx[j];
    const float val = v[i];
    const std::uint16_t w = f16 ? detail::f32_to_f16(val) : detail::f32_to_bf16(val);
    values[j] = w;
    if (r != nullptr) r[i] = __fsub_rn(val, f16 ? detail::f16_to_f32(w) : detail::bf16_to_f32(w));
    if (u != nullptr) u[i] = 0.0f;
  }
}

unsigned grid(std::uint64_t work) { return detail::grid_for(work, kThreads); }

}  // namespace

TopKEncoder::~TopKEncoder() {
  for (Buffer* b : {&sample_, &sample_sorted_, &cand_, &cand_alt_, &keys_, &keys_alt_, &lens_,
                    &temp_, &counter_}) {
    if (b->ptr != nullptr) cudaFree(b->ptr);
  }
}

Status TopKEncoder::reserve(Buffer& b, std::size_t bytes) {
  if (b.bytes >= bytes) return Status::ok();
  if (b.ptr != nullptr) {
    TRIB_CUDA_RETURN_IF_ERROR(cudaFree(b.ptr), "gpu topk: free scratch");
    b = Buffer{};
  }
  bytes = std::max<std::size_t>(bytes, 256);
  TRIB_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.ptr, bytes), "gpu topk: scratch");
  b.bytes = bytes;
  return Status::ok();
}

template <typename F>
Status TopKEncoder::cub_run(F&& f, const char* what) {
  std::size_t bytes = 0;
  TRIB_CUDA_RETURN_IF_ERROR(f(nullptr, bytes), what);
  TRIB_RETURN_IF_ERROR(reserve(temp_, bytes));
  bytes = temp_.bytes;
  return detail::cuda_status(f(temp_.ptr, bytes), what);
}

std::size_t TopKEncoder::max_payload_bytes(const CodecConfig& c, std::size_t count) {
  const double max_density = c.warmup_steps_per_stage > 0 ? std::max(c.density, 0.25) : c.density;
  return kTopKHeader + pad4(ceil_div(count, 8)) + 2 * max_nnz(count, max_density);
}

Result<std::size_t> TopKEncoder::select_into_scratch(const float* v, std::size_t n, std::size_t k,
                                                     std::size_t cap, RngKey key,
                                                     cudaStream_t stream) {
  TRIB_RETURN_IF_ERROR(reserve(counter_, sizeof(Counters)));
  auto* counters = static_cast<Counters*>(counter_.ptr);
  const double density = static_cast<double>(k) / static_cast<double>(n);
  const std::size_t want = std::clamp<std::size_t>(static_cast<std::size_t>(256.0 / density), 16384,
                                                   std::size_t{1} << 20);
  const bool exact = want >= n;
  const std::size_t s = exact ? n : want;

  // The sample, sorted once.
  TRIB_RETURN_IF_ERROR(reserve(sample_, 4 * s));
  TRIB_RETURN_IF_ERROR(reserve(sample_sorted_, 4 * s));
  auto* sample = static_cast<std::uint32_t*>(sample_.ptr);
  auto* sorted = static_cast<std::uint32_t*>(sample_sorted_.ptr);
  sample_kernel<<<grid(s), kThreads, 0, stream>>>(v, n, s, exact, key.k0, key.k1, sample);
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: sample"));
  TRIB_RETURN_IF_ERROR(cub_run(
      [&](void* tmp, std::size_t& bytes) {
        return cub::DeviceRadixSort::SortKeys(tmp, bytes, sample, sorted,
                                              static_cast<std::int64_t>(s), 0, 31, stream);
      },
      "gpu topk: sort sample"));

  // Gathers the indices with |v| >= t into cand_ (capacity `room`); returns how many
  // passed (possibly more than were stored).
  const bool vec = reinterpret_cast<std::uintptr_t>(v) % 16 == 0;
  auto gather = [&](std::size_t room) -> Result<std::size_t> {
    TRIB_RETURN_IF_ERROR(reserve(cand_, 4 * room));
    const BoundedOut out{static_cast<std::uint32_t*>(cand_.ptr), 0,
                         static_cast<std::ptrdiff_t>(room)};
    const AtLeast pred{v, &counters->t};
    TRIB_RETURN_IF_ERROR(cub_run(
        [&](void* tmp, std::size_t& bytes) {
          return cub::DeviceSelect::If(tmp, bytes, thrust::counting_iterator<std::uint32_t>(0), out,
                                       &counters->selected, static_cast<std::int64_t>(n), pred,
                                       stream);
        },
        "gpu topk: select"));
    unsigned long long got = 0;
    TRIB_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&got, &counters->selected, sizeof(got), cudaMemcpyDeviceToHost, stream),
        "gpu topk: count");
    TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "gpu topk: select");
    return static_cast<std::size_t>(got);
  };
  auto count_ge = [&]() -> Result<std::size_t> {
    count_kernel<<<grid(n / 4 + 1), kThreads, 0, stream>>>(v, n, vec, counters);
    TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: count"));
    unsigned long long got = 0;
    TRIB_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&got, &counters->selected, sizeof(got), cudaMemcpyDeviceToHost, stream),
        "gpu topk: count");
    TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "gpu topk: count");
    return static_cast<std::size_t>(got);
  };
  // Gathers at the current threshold, all of them (a second pass only when the first
  // found more than `room`).
  auto gather_all = [&](std::size_t room) -> Result<std::size_t> {
    auto got = gather(room);
    if (!got || *got <= room) return got;
    return gather(*got);
  };

  // The CPU's rounds (compression/topk.cc, select_threshold), with the same double
  // arithmetic, so the same thresholds are tried in the same order.
  std::size_t found = 0;
  double frac = density;
  for (int round = 0; round < 6; ++round) {
    std::size_t above = static_cast<std::size_t>(std::ceil(frac * static_cast<double>(s)));
    above = std::clamp<std::size_t>(above, 1, s);
    threshold_kernel<<<1, 1, 0, stream>>>(sorted, s - above, counters);
    TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: threshold"));
    if (!exact && round > 0) {
      auto c = count_ge();
      if (!c) return c.status();
      const double ratio = static_cast<double>(*c) / static_cast<double>(k);
      if ((ratio > 1.5 || ratio < 1.0 / 1.5) && round < 5) {
        frac = std::clamp(*c == 0 ? frac * 4 : frac / ratio, 1.0 / static_cast<double>(s), 1.0);
        continue;
      }
      auto g = gather_all(*c);
      if (!g) return g.status();
      found = *g;
      break;
    }
    auto g = exact ? gather_all(cap) : gather(cap);
    if (!g) return g.status();
    found = *g;
    if (exact) break;
    const double ratio = static_cast<double>(found) / static_cast<double>(k);
    if (ratio <= 1.5 && ratio >= 1.0 / 1.5) break;  // in range: found <= 1.5k <= cap, all stored
    frac = std::clamp(found == 0 ? frac * 4 : frac / ratio, 1.0 / static_cast<double>(s), 1.0);
  }
  if (found <= cap) return found;

  // Ties or a skewed sample: keep the k largest, (|v| desc, index asc), in index order.
  TRIB_RETURN_IF_ERROR(reserve(keys_, 4 * found));
  TRIB_RETURN_IF_ERROR(reserve(keys_alt_, 4 * found));
  TRIB_RETURN_IF_ERROR(reserve(cand_alt_, 4 * found));
  auto* cand = static_cast<std::uint32_t*>(cand_.ptr);
  auto* cand_alt = static_cast<std::uint32_t*>(cand_alt_.ptr);
  auto* keys = static_cast<std::uint32_t*>(keys_.ptr);
  auto* keys_alt = static_cast<std::uint32_t*>(keys_alt_.ptr);
  keys_kernel<<<grid(found), kThreads, 0, stream>>>(v, cand, found, keys);
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: keys"));
  TRIB_RETURN_IF_ERROR(cub_run(
      [&](void* tmp, std::size_t& bytes) {
        return cub::DeviceRadixSort::SortPairsDescending(tmp, bytes, keys, keys_alt, cand, cand_alt,
                                                         static_cast<std::int64_t>(found), 0, 31,
                                                         stream);
      },
      "gpu topk: cut"));
  TRIB_RETURN_IF_ERROR(cub_run(
      [&](void* tmp, std::size_t& bytes) {
        return cub::DeviceRadixSort::SortKeys(tmp, bytes, cand_alt, cand,
                                              static_cast<std::int64_t>(k), 0, 32, stream);
      },
      "gpu topk: cut (index order)"));
  return k;
}

Result<std::size_t> TopKEncoder::select_sampled(const float* d_v, std::size_t count, std::size_t k,
                                                std::size_t cap, RngKey key, std::uint32_t* d_idx,
                                                cudaStream_t stream) {
  if (count == 0) return std::size_t{0};
  if (k == 0 || k > count || cap < k)
    return error(StatusCode::kInvalidArgument, "gpu topk: bad k or cap");
  auto nnz = select_into_scratch(d_v, count, k, cap, key, stream);
  if (!nnz) return nnz;
  TRIB_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_idx, cand_.ptr, 4 * *nnz, cudaMemcpyDeviceToDevice, stream),
      "gpu topk: copy indices");
  return nnz;
}

Result<std::size_t> TopKEncoder::select_exact(const float* d_v, std::size_t n, std::size_t k,
                                              std::uint32_t* d_idx, cudaStream_t stream) {
  if (n == 0 || k == 0) return std::size_t{0};
  k = std::min(k, n);
  TRIB_RETURN_IF_ERROR(reserve(counter_, sizeof(Counters)));
  TRIB_RETURN_IF_ERROR(reserve(keys_, 4 * n));
  TRIB_RETURN_IF_ERROR(reserve(keys_alt_, 4 * n));
  TRIB_RETURN_IF_ERROR(reserve(cand_, 4 * n));
  TRIB_RETURN_IF_ERROR(reserve(cand_alt_, 4 * n));
  auto* keys = static_cast<std::uint32_t*>(keys_.ptr);
  auto* keys_alt = static_cast<std::uint32_t*>(keys_alt_.ptr);
  auto* cand = static_cast<std::uint32_t*>(cand_.ptr);
  auto* cand_alt = static_cast<std::uint32_t*>(cand_alt_.ptr);
  keys_kernel<<<grid(n), kThreads, 0, stream>>>(d_v, nullptr, n, keys);
  iota_kernel<<<grid(n), kThreads, 0, stream>>>(cand, n);
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk exact: keys"));
  TRIB_RETURN_IF_ERROR(cub_run(
      [&](void* tmp, std::size_t& bytes) {
        return cub::DeviceRadixSort::SortPairsDescending(tmp, bytes, keys, keys_alt, cand, cand_alt,
                                                         static_cast<std::int64_t>(n), 0, 31,
                                                         stream);
      },
      "gpu topk exact: sort"));
  // Exact zeros are never sent: they sort last, so count the non-zero keys among the k.
  auto* counters = static_cast<Counters*>(counter_.ptr);
  const std::uint32_t one = 1;
  TRIB_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(&counters->selected, 0, sizeof(unsigned long long), stream),
      "gpu topk exact: reset");
  TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&counters->t, &one, 4, cudaMemcpyHostToDevice, stream),
                            "gpu topk exact: threshold");
  count_kernel<<<grid(k / 4 + 1), kThreads, 0, stream>>>(reinterpret_cast<const float*>(keys_alt),
                                                         k, true, counters);
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk exact: count"));
  unsigned long long nonzero = 0;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&nonzero, &counters->selected, sizeof(nonzero),
                                            cudaMemcpyDeviceToHost, stream),
                            "gpu topk exact: count");
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "gpu topk exact");
  if (nonzero > 0) {
    TRIB_RETURN_IF_ERROR(cub_run(
        [&](void* tmp, std::size_t& bytes) {
          return cub::DeviceRadixSort::SortKeys(tmp, bytes, cand_alt, d_idx,
                                                static_cast<std::int64_t>(nonzero), 0, 32, stream);
        },
        "gpu topk exact: index order"));
  }
  return static_cast<std::size_t>(nonzero);
}

Result<std::size_t> TopKEncoder::encode(const float* d_x, std::size_t count,
                                        const CodecConfig& config, const DeviceEncodeOptions& o,
                                        std::byte* d_out, std::size_t out_capacity,
                                        cudaStream_t stream) {
  if (config.codec != CodecId::kTopK || config.zstd) {
    return error(StatusCode::kInvalidArgument, "gpu topk: config is not plain top-k");
  }
  if (count > compression::kMaxPayloadElements) {
    return error(StatusCode::kInvalidArgument,
                 "gpu topk: more than 2^32-1 elements in one payload");
  }
  if (out_capacity < max_payload_bytes(config, count)) {
    return error(StatusCode::kInvalidArgument, "gpu topk: output smaller than max_payload_bytes");
  }
  if (reinterpret_cast<std::uintptr_t>(d_out) % 4 != 0) {
    return error(StatusCode::kInvalidArgument, "gpu topk: output not 4-byte aligned");
  }
  const bool use_momentum = config.momentum > 0.0f && o.momentum != nullptr;
  if (use_momentum && o.residual == nullptr) {
    return error(StatusCode::kInvalidArgument, "topk encode: momentum correction needs a residual");
  }
  const bool f16 = config.values == DType::kFloat16;
  const float* v = d_x;
  if (count > 0 && use_momentum) {
    momentum_kernel<<<grid(count), kThreads, 0, stream>>>(o.momentum, o.residual, d_x, count,
                                                          config.momentum);
    v = o.residual;
  } else if (count > 0 && o.residual != nullptr) {
    add_residual_kernel<<<grid(count), kThreads, 0, stream>>>(o.residual, d_x, count);
    v = o.residual;
  }
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: error feedback"));

  std::size_t nnz = 0;
  if (count > 0) {
    const double density = compression::topk_density_at(config, o.step);
    const std::size_t k = target_k(count, density);
    const std::size_t cap = max_nnz(count, density);
    auto got = select_into_scratch(v, count, k, cap,
                                   compression::rng_key(o.seed, o.stream, o.step, o.rank), stream);
    if (!got) return got.status();
    nnz = *got;
  }
  const auto* idx = static_cast<const std::uint32_t*>(cand_.ptr);

  std::uint64_t varint_bytes = 0;
  if (nnz > 0) {
    TRIB_RETURN_IF_ERROR(reserve(lens_, 8 * nnz));
    auto* lens = static_cast<std::uint32_t*>(lens_.ptr);
    auto* counters = static_cast<Counters*>(counter_.ptr);
    TRIB_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(&counters->varint_bytes, 0, 8, stream),
                              "gpu topk: reset");
    varint_len_kernel<<<grid(nnz), kThreads, 0, stream>>>(idx, nnz, lens, counters);
    TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: varint lengths"));
    TRIB_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&varint_bytes, &counters->varint_bytes, 8, cudaMemcpyDeviceToHost, stream),
        "gpu topk: varint total");
    TRIB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "gpu topk: varint total");
  }
  const std::uint64_t bitmap_bytes = ceil_div(count, 8);
  const bool bitmap = bitmap_bytes <= varint_bytes;
  const std::uint64_t index_bytes = bitmap ? bitmap_bytes : varint_bytes;
  auto* index = reinterpret_cast<std::uint8_t*>(d_out + kTopKHeader);
  if (bitmap) {
    TRIB_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(index, 0, pad4(index_bytes), stream),
                              "gpu topk: bitmap");
    if (nnz > 0) {
      bitmap_kernel<<<grid(nnz), kThreads, 0, stream>>>(idx, nnz,
                                                        reinterpret_cast<std::uint32_t*>(index));
    }
  } else {
    auto* lens = static_cast<std::uint32_t*>(lens_.ptr);
    std::uint32_t* offs = lens + nnz;
    TRIB_RETURN_IF_ERROR(cub_run(
        [&](void* tmp, std::size_t& bytes) {
          return cub::DeviceScan::ExclusiveSum(tmp, bytes, lens, offs,
                                               static_cast<std::int64_t>(nnz), stream);
        },
        "gpu topk: scan"));
    if (pad4(index_bytes) > index_bytes) {
      TRIB_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(index + index_bytes, 0, pad4(index_bytes) - index_bytes, stream),
          "gpu topk: pad");
    }
    varint_write_kernel<<<grid(nnz), kThreads, 0, stream>>>(idx, offs, nnz, index);
  }
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: index"));

  Head head{};
  head.w[0] = compression::kPayloadMagic |
              std::uint32_t{static_cast<std::uint8_t>(CodecId::kTopK)} << 16 |
              std::uint32_t{compression::kPayloadVersion} << 24;
  head.w[1] = static_cast<std::uint32_t>(count);
  head.w[2] = static_cast<std::uint32_t>(nnz);
  head.w[3] = (f16 ? kValuesF16 : 0u) | (bitmap ? kIndexBitmap : 0u);
  head.w[4] = static_cast<std::uint32_t>(index_bytes);
  auto* values = reinterpret_cast<std::uint16_t*>(d_out + kTopKHeader + pad4(index_bytes));
  values_kernel<<<grid(std::max<std::size_t>(nnz, 1)), kThreads, 0, stream>>>(
      head, reinterpret_cast<std::uint32_t*>(d_out), v, idx, nnz, f16, values, o.residual,
      use_momentum ? o.momentum : nullptr);
  TRIB_RETURN_IF_ERROR(detail::launch_status("gpu topk: values"));
  return kTopKHeader + pad4(index_bytes) + 2 * nnz;
}

}  // namespace tributary::gpu
