// qint8 / qint4 on the GPU: the CPU codec's arithmetic (compression/qint.cc), one IEEE
// operation per step with explicit rounding intrinsics, so the bytes match to the bit.
//
// Encode is one pass over the tensor for buckets up to kWarpBucketMax elements: a warp
// owns a bucket, reads it once for amax (warp max of the |v| bits), then reads it again
// from L1 (the bucket is a few KB and was just loaded) to quantize. Device memory sees
// 4 bytes read and 1 (qint8) or 0.5 (qint4) written per element, plus the residual when
// error feedback is on. Larger buckets take two kernels per batch of buckets that fits in
// L2: block-wide amax into a scratch word per bucket (atomicMax on the bits), then the
// quantize pass, whose reads hit L2.
//
// Decode is one thread per group of 4 (qint8) or 8 (qint4) codes when the bucket size
// and the pointers allow 16-byte stores, else per element; decode-accumulate adds
// q*scale into the destination in the same pass.
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "gpu/cuda_status.h"
#include "gpu/device_codec.h"
#include "gpu/device_math.cuh"

namespace tributary::gpu {
namespace {

using compression::CodecId;
using compression::PayloadHeader;

constexpr std::uint32_t kMaxBucket = std::uint32_t{1} << 24;
constexpr std::uint32_t kWarpBucketMax = 4096;
constexpr unsigned kThreads = 256;
constexpr std::uint32_t kItem = 8192;  // large-bucket path: elements per block item
constexpr std::uint64_t kBatchBytes = std::uint64_t{24}
                                      << 20;  // large-bucket path: per batch, well inside L2

struct EncodeArgs {
  const float* x;
  float* r;  // residual or null
  std::uint64_t n;
  std::uint32_t bucket;
  std::uint64_t nb;
  std::uint32_t k0, k1;
  std::uint64_t e0;  // element_offset: RNG counter of element 0
  bool stochastic;
  float* scales;
  std::uint8_t* codes;
  std::uint32_t* nonfinite;  // or null
  std::uint32_t* amax;       // large-bucket scratch (nb words), or null
  std::uint32_t header[4];   // the 16 header bytes, little-endian words
  std::uint32_t* header_out;
};

template <int kBits>
__device__ __forceinline__ float levels() {
  return kBits == 8 ? 127.0f : 7.0f;
}

// v = x (+ r) for kVec consecutive elements starting at element i (i % kVec == 0 and the
// pointers aligned for kVec == 4; kVec 1 and 2 load scalars).
template <int kVec>
__device__ __forceinline__ void load_v(const EncodeArgs& a, std::uint64_t i, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 x = *reinterpret_cast<const float4*>(a.x + i);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    if (a.r != nullptr) {
      const float4 r = *reinterpret_cast<const float4*>(a.r + i);
      v[0] = __fadd_rn(v[0], r.x), v[1] = __fadd_rn(v[1], r.y);
      v[2] = __fadd_rn(v[2], r.z), v[3] = __fadd_rn(v[3], r.w);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = a.x[i + k];
    if (a.r != nullptr) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = __fadd_rn(v[k], a.r[i + k]);
    }
  }
}

__device__ __forceinline__ float load_one(const EncodeArgs& a, std::uint64_t i) {
  return a.r != nullptr ? __fadd_rn(a.x[i], a.r[i]) : a.x[i];
}

// float -> int32 as x86's cvttss2si/cvttps2dq, which the CPU codec's casts compile to:
// truncation toward zero, and 0x80000000 for NaN and anything outside int32. (The C++
// cast is undefined there; CUDA's would saturate. They differ only when inv overflowed,
// below.)
__device__ __forceinline__ int x86_cvtt(float f) {
  return f >= -2147483648.0f && f < 2147483648.0f ? static_cast<int>(f) : INT_MIN;
}

// q for v at tensor element i (payload index; the RNG counter is e0 + i): the CPU's
// floor_small / rne_small, clamp and int8 store, literally: floor(t + u) or rint(t),
// clamped. inv is finite (scale_of), so t is too.
template <int kBits>
__device__ __forceinline__ int quantize(const EncodeArgs& a, float v, float inv, std::uint64_t i) {
  const float L = levels<kBits>();
  const float t = __fmul_rn(v, inv);
  float c;
  if (a.stochastic) {
    const std::uint64_t e = a.e0 + i;
    const std::uint32_t bits = detail::rng_bits(a.k0, a.k1, static_cast<std::uint32_t>(e),
                                                static_cast<std::uint32_t>(e >> 32));
    const float y = __fadd_rn(t, detail::rng_uniform(bits));
    const float tr = __int2float_rn(x86_cvtt(y));
    c = tr > y ? __fsub_rn(tr, 1.0f) : tr;
  } else {
    c = __fsub_rn(__fadd_rn(t, 0x1.8p23f), 0x1.8p23f);  // round to nearest even, |t| < 2^22
  }
  c = c > L ? L : c;
  c = c < -L ? -L : c;
  return static_cast<std::int8_t>(x86_cvtt(c));
}

// r = v - q*scale, two roundings (the CPU's residual_update).
__device__ __forceinline__ float residual_after(float v, int q, float scale) {
  return __fsub_rn(v, __fmul_rn(__int2float_rn(q), scale));
}

// amax bits of v over elements [begin, begin + len), this thread's share (t of stride).
template <int kVec>
__device__ std::uint32_t amax_span(const EncodeArgs& a, std::uint64_t begin, std::uint32_t len,
                                   std::uint32_t t, std::uint32_t stride) {
  std::uint32_t m = 0;
  const std::uint32_t nv = len / kVec;
#pragma unroll 4
  for (std::uint32_t j = t; j < nv; j += stride) {
    float v[kVec];
    load_v<kVec>(a, begin + std::uint64_t{j} * kVec, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = max(m, detail::abs_bits(v[k]));
  }
  for (std::uint32_t i = nv * kVec + t; i < len; i += stride) {
    m = max(m, detail::abs_bits(load_one(a, begin + i)));
  }
  return m;
}

// Quantizes elements [begin, begin + len) (begin a multiple of kVec, even for qint4),
// writes their codes and, with error feedback, their residual.
template <int kBits, int kVec>
__device__ void quant_span(const EncodeArgs& a, std::uint64_t begin, std::uint32_t len, float scale,
                           float inv, std::uint32_t t, std::uint32_t stride) {
  const std::uint32_t nv = len / kVec;
#pragma unroll 2
  for (std::uint32_t j = t; j < nv; j += stride) {
    const std::uint64_t i = begin + std::uint64_t{j} * kVec;
    float v[kVec];
    load_v<kVec>(a, i, v);
    int q[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) q[k] = quantize<kBits>(a, v[k], inv, i + k);
    if constexpr (kBits == 8 && kVec == 4) {
      const std::uint32_t w = (q[0] & 0xffu) | (q[1] & 0xffu) << 8 | (q[2] & 0xffu) << 16 |
                              static_cast<std::uint32_t>(q[3] & 0xff) << 24;
      *reinterpret_cast<std::uint32_t*>(a.codes + i) = w;
    } else if constexpr (kBits == 8) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) a.codes[i + k] = static_cast<std::uint8_t>(q[k]);
    } else if constexpr (kVec == 4) {
      const std::uint32_t lo =
          static_cast<std::uint32_t>(q[0] + 8) | static_cast<std::uint32_t>(q[1] + 8) << 4;
      const std::uint32_t hi =
          static_cast<std::uint32_t>(q[2] + 8) | static_cast<std::uint32_t>(q[3] + 8) << 4;
      *reinterpret_cast<std::uint16_t*>(a.codes + i / 2) = static_cast<std::uint16_t>(lo | hi << 8);
    } else {
      static_assert(kVec == 2, "qint4 packs pairs");
      a.codes[i / 2] = static_cast<std::uint8_t>((q[0] + 8) | (q[1] + 8) << 4);
    }
    if (a.r != nullptr) {
      if constexpr (kVec == 4) {
        float4 r;
        r.x = residual_after(v[0], q[0], scale), r.y = residual_after(v[1], q[1], scale);
        r.z = residual_after(v[2], q[2], scale), r.w = residual_after(v[3], q[3], scale);
        *reinterpret_cast<float4*>(a.r + i) = r;
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) a.r[i + k] = residual_after(v[k], q[k], scale);
      }
    }
  }
  // The last bucket's tail (fewer than kVec elements): one thread, in order.
  const std::uint32_t done = nv * kVec;
  if (done == len || t != 0) return;
  for (std::uint32_t o = done; o < len; o += (kBits == 8 ? 1 : 2)) {
    const std::uint64_t i = begin + o;
    const float v0 = load_one(a, i);
    const int q0 = quantize<kBits>(a, v0, inv, i);
    if (a.r != nullptr) a.r[i] = residual_after(v0, q0, scale);
    if constexpr (kBits == 8) {
      a.codes[i] = static_cast<std::uint8_t>(q0);
    } else {
      int q1 = -8;  // an odd count's pad nibble encodes as 0
      if (o + 1 < len) {
        const float v1 = load_one(a, i + 1);
        q1 = quantize<kBits>(a, v1, inv, i + 1);
        if (a.r != nullptr) a.r[i + 1] = residual_after(v1, q1, scale);
      }
      a.codes[i / 2] = static_cast<std::uint8_t>((q0 + 8) | (q1 + 8) << 4);
    }
  }
}

__device__ __forceinline__ void scale_of(std::uint32_t m, float L, float& scale, float& inv) {
  const float amax = __uint_as_float(m);
  scale = __fdiv_rn(amax, L);
  inv = amax > 0.0f ? __fdiv_rn(L, amax) : 0.0f;
  if (isinf(inv)) inv = 0.0f;  // amax < L / FLT_MAX: the bucket encodes as zeros (as the CPU)
}

__device__ __forceinline__ void publish_scale(const EncodeArgs& a, std::uint64_t b, std::uint32_t m,
                                              float scale) {
  a.scales[b] = scale;
  if (m >= 0x7f800000u && a.nonfinite != nullptr) atomicOr(a.nonfinite, 1u);
}

__device__ __forceinline__ void write_header(const EncodeArgs& a) {
  // Constant indices only: a run-time index would move the whole argument block to
  // local memory.
  if (blockIdx.x == 0 && threadIdx.x == 0) {
#pragma unroll
    for (int w = 0; w < 4; ++w) a.header_out[w] = a.header[w];
  }
}

// One warp per bucket (buckets up to kWarpBucketMax elements), single pass.
// Warp-wide max of a 32-bit pattern. sm_80+ has a single instruction for it; older
// targets (a user's CMAKE_CUDA_ARCHITECTURES) fall back to a shuffle tree.
__device__ __forceinline__ std::uint32_t warp_max_u32(std::uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, v);
#else
  for (int offset = 16; offset > 0; offset >>= 1)
    v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
#endif
}

template <int kBits, int kVec>
__global__ void __launch_bounds__(kThreads) encode_warp_kernel(EncodeArgs a) {
  write_header(a);
  const std::uint32_t lane = threadIdx.x & 31u;
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) >> 5;
  const std::uint64_t nwarps = (std::uint64_t{gridDim.x} * blockDim.x) >> 5;
  for (std::uint64_t b = warp; b < a.nb; b += nwarps) {
    const std::uint64_t begin = b * a.bucket;
    const auto len = static_cast<std::uint32_t>(min(std::uint64_t{a.bucket}, a.n - begin));
    const std::uint32_t m = warp_max_u32(amax_span<kVec>(a, begin, len, lane, 32));
    float scale, inv;
    scale_of(m, levels<kBits>(), scale, inv);
    if (lane == 0) publish_scale(a, b, m, scale);
    quant_span<kBits, kVec>(a, begin, len, scale, inv, lane, 32);
  }
}

__device__ std::uint32_t block_max(std::uint32_t m) {
  __shared__ std::uint32_t warp_max[kThreads / 32];
  m = warp_max_u32(m);
  if ((threadIdx.x & 31u) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  m = threadIdx.x < kThreads / 32 ? warp_max[threadIdx.x] : 0u;
  if (threadIdx.x < 32) m = warp_max_u32(m);
  __syncthreads();
  return m;  // valid in thread 0
}

// Large buckets: block items are (bucket, slice of kItem elements) over buckets [b0, b1);
// item `it` covers elements [begin, begin + len) of bucket b.
struct BucketItem {
  std::uint64_t bucket;
  std::uint64_t begin;
  std::uint32_t len;
  bool first;  // the bucket's first slice
};

__host__ __device__ __forceinline__ std::uint64_t items_per_bucket(const EncodeArgs& a) {
  return (a.bucket + kItem - 1) / kItem;
}

__device__ __forceinline__ BucketItem bucket_item(const EncodeArgs& a, std::uint64_t b0,
                                                  std::uint64_t per_bucket, std::uint64_t it) {
  const std::uint64_t b = b0 + it / per_bucket;
  const std::uint64_t begin = b * a.bucket + (it % per_bucket) * kItem;
  const std::uint64_t end = min(b * a.bucket + a.bucket, a.n);
  return {b, begin, static_cast<std::uint32_t>(min(std::uint64_t{kItem}, end - begin)),
          it % per_bucket == 0};
}

// Large buckets, pass 1.
template <int kVec>
__global__ void __launch_bounds__(kThreads)
    amax_items_kernel(EncodeArgs a, std::uint64_t b0, std::uint64_t b1) {
  const std::uint64_t per_bucket = items_per_bucket(a);
  const std::uint64_t items = (b1 - b0) * per_bucket;
  for (std::uint64_t it = blockIdx.x; it < items; it += gridDim.x) {
    const BucketItem item = bucket_item(a, b0, per_bucket, it);
    const std::uint32_t m =
        block_max(amax_span<kVec>(a, item.begin, item.len, threadIdx.x, kThreads));
    if (threadIdx.x == 0 && m != 0) atomicMax(a.amax + item.bucket, m);
  }
}

// Large buckets, pass 2.
template <int kBits, int kVec>
__global__ void __launch_bounds__(kThreads)
    quant_items_kernel(EncodeArgs a, std::uint64_t b0, std::uint64_t b1) {
  write_header(a);
  const std::uint64_t per_bucket = items_per_bucket(a);
  const std::uint64_t items = (b1 - b0) * per_bucket;
  for (std::uint64_t it = blockIdx.x; it < items; it += gridDim.x) {
    const BucketItem item = bucket_item(a, b0, per_bucket, it);
    const std::uint32_t m = a.amax[item.bucket];
    float scale, inv;
    scale_of(m, levels<kBits>(), scale, inv);
    if (threadIdx.x == 0 && item.first) publish_scale(a, item.bucket, m, scale);
    quant_span<kBits, kVec>(a, item.begin, item.len, scale, inv, threadIdx.x, kThreads);
  }
}

// Large buckets: per batch of buckets (about kBatchBytes of input, so that the second
// pass reads from L2), amax then quantize. a.amax is nb zeroed-to-be words.
template <int kBits, int kVec>
Status launch_large(const EncodeArgs& a, cudaStream_t stream) {
  TRIB_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(a.amax, 0, a.nb * sizeof(std::uint32_t), stream),
                            "qint encode: memset");
  const std::uint64_t per_batch = std::max<std::uint64_t>(1, kBatchBytes / (4ull * a.bucket));
  const std::uint64_t per_bucket = items_per_bucket(a);
  for (std::uint64_t b0 = 0; b0 < a.nb; b0 += per_batch) {
    const std::uint64_t b1 = std::min(a.nb, b0 + per_batch);
    const unsigned grid = detail::grid_for((b1 - b0) * per_bucket, 1);
    amax_items_kernel<kVec><<<grid, kThreads, 0, stream>>>(a, b0, b1);
    quant_items_kernel<kBits, kVec><<<grid, kThreads, 0, stream>>>(a, b0, b1);
    TRIB_RETURN_IF_ERROR(detail::launch_status("qint encode (large buckets)"));
  }
  return Status::ok();
}

template <int kBits, int kVec>
Status launch_encode(EncodeArgs& a, cudaStream_t stream) {
  if (a.bucket <= kWarpBucketMax) {
    const unsigned grid = detail::grid_for(a.nb * 32, kThreads);
    encode_warp_kernel<kBits, kVec><<<grid, kThreads, 0, stream>>>(a);
    return detail::launch_status("qint encode");
  }
  void* scratch = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&scratch, a.nb * sizeof(std::uint32_t), stream),
                            "qint encode: amax scratch");
  a.amax = static_cast<std::uint32_t*>(scratch);
  const Status st = launch_large<kBits, kVec>(a, stream);
  const Status freed = detail::cuda_status(cudaFreeAsync(scratch, stream), "qint encode: free");
  return st.is_ok() ? freed : st;
}

// --- decode ---------------------------------------------------------------------------

struct DecodeArgs {
  const float* scales;
  const std::uint8_t* codes;
  float* out;
  std::uint64_t n;
  std::uint32_t bucket;
};

template <bool kAcc>
__device__ __forceinline__ float emit(float old, int q, float s) {
  const float d = __fmul_rn(__int2float_rn(q), s);
  return kAcc ? __fadd_rn(old, d) : d;
}

template <int kBits>
__device__ __forceinline__ int code_at(const std::uint8_t* codes, std::uint64_t i) {
  if constexpr (kBits == 8) {
    return static_cast<std::int8_t>(codes[i]);
  } else {
    const std::uint32_t byte = codes[i / 2];
    return static_cast<int>((i & 1) ? byte >> 4 : byte & 15u) - 8;
  }
}

// kVec elements per thread: qint8 4 (one 32-bit load of codes, one float4 store), qint4 8
// (one 32-bit load, two float4 stores), or 1 (any bucket size, any alignment).
template <int kBits, int kVec, bool kAcc>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeArgs a) {
  const std::uint64_t groups = a.n / kVec;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t g = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    const std::uint64_t i = g * kVec;
    // Payloads hold < 2^32 elements: 32-bit division.
    const float s = a.scales[static_cast<std::uint32_t>(i) / a.bucket];
    if constexpr (kVec == 1) {
      a.out[i] = emit<kAcc>(kAcc ? a.out[i] : 0.0f, code_at<kBits>(a.codes, i), s);
    } else {
      const std::uint32_t w = reinterpret_cast<const std::uint32_t*>(a.codes)[g];
      float4* o = reinterpret_cast<float4*>(a.out + i);
#pragma unroll
      for (int h = 0; h < kVec / 4; ++h) {
        int q[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          q[k] = kBits == 8 ? static_cast<int>(static_cast<std::int8_t>(w >> (8 * k)))
                            : static_cast<int>((w >> (4 * (4 * h + k))) & 15u) - 8;
        }
        float4 prev = kAcc ? o[h] : float4{0, 0, 0, 0};
        prev.x = emit<kAcc>(prev.x, q[0], s), prev.y = emit<kAcc>(prev.y, q[1], s);
        prev.z = emit<kAcc>(prev.z, q[2], s), prev.w = emit<kAcc>(prev.w, q[3], s);
        o[h] = prev;
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {  // the tail past the last full group
    for (std::uint64_t i = groups * kVec; i < a.n; ++i) {
      const float s = a.scales[static_cast<std::uint32_t>(i) / a.bucket];
      a.out[i] = emit<kAcc>(kAcc ? a.out[i] : 0.0f, code_at<kBits>(a.codes, i), s);
    }
  }
}

template <int kBits, int kVec>
Status launch_decode(const DecodeArgs& a, bool accumulate, cudaStream_t stream) {
  const unsigned grid = detail::grid_for(a.n / kVec + 1, kThreads);
  if (accumulate) {
    decode_kernel<kBits, kVec, true><<<grid, kThreads, 0, stream>>>(a);
  } else {
    decode_kernel<kBits, kVec, false><<<grid, kThreads, 0, stream>>>(a);
  }
  return detail::launch_status("qint decode");
}

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace

Result<QIntParams> qint_params(const compression::CodecConfig& c) {
  if (c.codec != CodecId::kQInt8 && c.codec != CodecId::kQInt4) {
    return error(StatusCode::kInvalidArgument, std::string("gpu qint: not a qint codec: ") +
                                                   std::string(compression::to_string(c.codec)));
  }
  if (c.zstd)
    return error(StatusCode::kInvalidArgument, "gpu qint: the zstd stage runs on the CPU");
  return QIntParams{c.codec == CodecId::kQInt8 ? 8 : 4, c.bucket_size, c.stochastic};
}

std::size_t qint_payload_bytes(const QIntParams& p, std::size_t count) {
  return compression::kHeaderBytes + 4 * ceil_div(count, p.bucket) +
         (p.bits == 8 ? count : ceil_div(count, 2));
}

Status qint_encode(const float* d_x, std::size_t count, const QIntParams& p,
                   const DeviceEncodeOptions& o, std::byte* d_out, std::uint32_t* d_nonfinite,
                   cudaStream_t stream) {
  if (p.bits != 8 && p.bits != 4)
    return error(StatusCode::kInvalidArgument, "gpu qint: bits must be 8 or 4");
  if (p.bucket == 0 || p.bucket > kMaxBucket || (p.bits == 4 && p.bucket % 2 != 0)) {
    return error(StatusCode::kInvalidArgument,
                 "gpu qint: bad bucket size " + std::to_string(p.bucket));
  }
  if (count > compression::kMaxPayloadElements) {
    return error(StatusCode::kInvalidArgument,
                 "gpu qint: more than 2^32-1 elements in one payload");
  }
  if (!aligned(d_out, 4))
    return error(StatusCode::kInvalidArgument, "gpu qint: output not 4-byte aligned");
  EncodeArgs a{};
  a.x = d_x;
  a.r = o.residual;
  a.n = count;
  a.bucket = p.bucket;
  a.nb = ceil_div(count, p.bucket);
  const compression::RngKey key = compression::rng_key(o.seed, o.stream, o.step, o.rank);
  a.k0 = key.k0;
  a.k1 = key.k1;
  a.e0 = o.element_offset;
  a.stochastic = p.stochastic;
  a.header_out = reinterpret_cast<std::uint32_t*>(d_out);
  a.scales = reinterpret_cast<float*>(d_out + compression::kHeaderBytes);
  a.codes = reinterpret_cast<std::uint8_t*>(d_out + compression::kHeaderBytes + 4 * a.nb);
  a.nonfinite = d_nonfinite;
  const auto id = static_cast<std::uint32_t>(p.bits == 8 ? CodecId::kQInt8 : CodecId::kQInt4);
  a.header[0] =
      compression::kPayloadMagic | id << 16 | std::uint32_t{compression::kPayloadVersion} << 24;
  a.header[1] = static_cast<std::uint32_t>(count);
  a.header[2] = p.bucket;
  a.header[3] = p.stochastic ? 1u : 0u;
  if (count == 0) {
    return detail::cuda_status(cudaMemcpyAsync(d_out, a.header, 16, cudaMemcpyHostToDevice, stream),
                               "qint encode: header");
  }
  const bool vec =
      p.bucket % 4 == 0 && aligned(d_x, 16) && (o.residual == nullptr || aligned(o.residual, 16));
  if (p.bits == 8) return vec ? launch_encode<8, 4>(a, stream) : launch_encode<8, 1>(a, stream);
  return vec ? launch_encode<4, 4>(a, stream) : launch_encode<4, 2>(a, stream);
}

Status qint_decode(const PayloadHeader& h, const std::byte* d_payload, float* d_out,
                   std::size_t count, bool accumulate, cudaStream_t stream) {
  if ((h.codec != CodecId::kQInt8 && h.codec != CodecId::kQInt4) || h.count != count ||
      h.param == 0 || h.param > kMaxBucket) {
    return error(StatusCode::kInvalidArgument,
                 "gpu qint decode: header not checked by check_payload");
  }
  if (!aligned(d_payload, 4))
    return error(StatusCode::kInvalidArgument, "gpu qint decode: payload not 4-byte aligned");
  if (count == 0) return Status::ok();
  DecodeArgs a{};
  const std::uint64_t nb = ceil_div(count, h.param);
  a.scales = reinterpret_cast<const float*>(d_payload + compression::kHeaderBytes);
  a.codes = reinterpret_cast<const std::uint8_t*>(d_payload + compression::kHeaderBytes + 4 * nb);
  a.out = d_out;
  a.n = count;
  a.bucket = h.param;
  const bool out16 = aligned(d_out, 16);
  if (h.codec == CodecId::kQInt8) {
    return out16 && h.param % 4 == 0 ? launch_decode<8, 4>(a, accumulate, stream)
                                     : launch_decode<8, 1>(a, accumulate, stream);
  }
  return out16 && h.param % 8 == 0 ? launch_decode<4, 8>(a, accumulate, stream)
                                   : launch_decode<4, 1>(a, accumulate, stream);
}

}  // namespace tributary::gpu
