// Reductions (gpu/device_reduce.h). One thread per 16 bytes (4 floats or 8 halves) when
// both pointers are 16-byte aligned, else one per element; a grid-stride loop keeps each
// thread's loads independent so several are in flight.
#include <cstdint>
#include <string>

#include "gpu/cuda_status.h"
#include "gpu/device_math.cuh"
#include "gpu/device_reduce.h"

namespace tributary::gpu {
namespace {

constexpr unsigned kThreads = 256;

// Element types as raw storage, with widen/narrow through float32.
struct F32 {
  using T = float;
  static __device__ __forceinline__ float widen(float v) { return v; }
  static __device__ __forceinline__ float narrow(float v) { return v; }
};
struct F16 {
  using T = std::uint16_t;
  static __device__ __forceinline__ float widen(std::uint16_t v) { return detail::f16_to_f32(v); }
  static __device__ __forceinline__ std::uint16_t narrow(float v) { return detail::f32_to_f16(v); }
};
struct BF16 {
  using T = std::uint16_t;
  static __device__ __forceinline__ float widen(std::uint16_t v) { return detail::bf16_to_f32(v); }
  static __device__ __forceinline__ std::uint16_t narrow(float v) { return detail::f32_to_bf16(v); }
};

struct OpSum {
  static __device__ __forceinline__ float apply(float a, float b) { return __fadd_rn(a, b); }
};
struct OpProd {
  static __device__ __forceinline__ float apply(float a, float b) { return __fmul_rn(a, b); }
};
struct OpMin {
  static __device__ __forceinline__ float apply(float a, float b) {
    return detail::float_minmax<true>(a, b);
  }
};
struct OpMax {
  static __device__ __forceinline__ float apply(float a, float b) {
    return detail::float_minmax<false>(a, b);
  }
};

template <typename E, typename Op>
__device__ __forceinline__ typename E::T combine(typename E::T d, typename E::T s) {
  return E::narrow(Op::apply(E::widen(d), E::widen(s)));
}

// kVec: elements per 16-byte vector (0 = scalar path).
template <typename E, typename Op, bool kVector>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(typename E::T* dst, const typename E::T* src, std::uint64_t n) {
  using T = typename E::T;
  constexpr std::uint64_t kPer = kVector ? 16 / sizeof(T) : 1;
  const std::uint64_t groups = n / kPer;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t g = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    if constexpr (kVector) {
      uint4 dv = reinterpret_cast<const uint4*>(dst)[g];
      const uint4 sv = reinterpret_cast<const uint4*>(src)[g];
      T* d = reinterpret_cast<T*>(&dv);
      const T* s = reinterpret_cast<const T*>(&sv);
#pragma unroll
      for (std::uint64_t k = 0; k < kPer; ++k) d[k] = combine<E, Op>(d[k], s[k]);
      reinterpret_cast<uint4*>(dst)[g] = dv;
    } else {
      dst[g] = combine<E, Op>(dst[g], src[g]);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::uint64_t i = groups * kPer; i < n; ++i) dst[i] = combine<E, Op>(dst[i], src[i]);
  }
}

template <typename E>
__global__ void __launch_bounds__(kThreads)
    scale_kernel(typename E::T* data, std::uint64_t n, float divisor) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    data[i] = E::narrow(__fdiv_rn(E::widen(data[i]), divisor));
  }
}

template <typename E, typename Op>
Status launch(void* dst, const void* src, std::size_t n, cudaStream_t stream) {
  using T = typename E::T;
  auto* d = static_cast<T*>(dst);
  const auto* s = static_cast<const T*>(src);
  const bool vec = reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(src) % 16 == 0;
  if (vec) {
    reduce_kernel<E, Op, true>
        <<<detail::grid_for(n / (16 / sizeof(T)) + 1, kThreads), kThreads, 0, stream>>>(d, s, n);
  } else {
    reduce_kernel<E, Op, false><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(d, s, n);
  }
  return detail::launch_status("gpu reduce_into");
}

template <typename E>
Status launch_op(void* dst, const void* src, std::size_t n, ReduceOp op, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return launch<E, OpSum>(dst, src, n, stream);
    case ReduceOp::kProd: return launch<E, OpProd>(dst, src, n, stream);
    case ReduceOp::kMin: return launch<E, OpMin>(dst, src, n, stream);
    case ReduceOp::kMax: return launch<E, OpMax>(dst, src, n, stream);
  }
  return error(StatusCode::kInvalidArgument, "gpu reduce_into: bad op");
}

// dst = srcs[0] (op) srcs[1] (op) ... in source order, each pairwise step rounded as in
// reduce_kernel; `divisor` > 0 divides once at the end (kAvg). One pass over the sources.
struct Sources {
  const void* p[kMaxReduceSources];
  int n;
};

template <typename E, typename Op, bool kVector>
__global__ void __launch_bounds__(kThreads)
    reduce_sources_kernel(typename E::T* dst, Sources srcs, std::uint64_t n, float divisor) {
  using T = typename E::T;
  constexpr std::uint64_t kPer = kVector ? 16 / sizeof(T) : 1;
  const std::uint64_t groups = n / kPer;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  auto finish = [divisor](T v) {
    return divisor > 0.0f ? E::narrow(__fdiv_rn(E::widen(v), divisor)) : v;
  };
  for (std::uint64_t g = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    if constexpr (kVector) {
      uint4 acc = reinterpret_cast<const uint4*>(srcs.p[0])[g];
      T* a = reinterpret_cast<T*>(&acc);
      for (int r = 1; r < srcs.n; ++r) {
        const uint4 sv = reinterpret_cast<const uint4*>(srcs.p[r])[g];
        const T* s = reinterpret_cast<const T*>(&sv);
#pragma unroll
        for (std::uint64_t k = 0; k < kPer; ++k) a[k] = combine<E, Op>(a[k], s[k]);
      }
#pragma unroll
      for (std::uint64_t k = 0; k < kPer; ++k) a[k] = finish(a[k]);
      reinterpret_cast<uint4*>(dst)[g] = acc;
    } else {
      T acc = static_cast<const T*>(srcs.p[0])[g];
      for (int r = 1; r < srcs.n; ++r)
        acc = combine<E, Op>(acc, static_cast<const T*>(srcs.p[r])[g]);
      dst[g] = finish(acc);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::uint64_t i = groups * kPer; i < n; ++i) {
      T acc = static_cast<const T*>(srcs.p[0])[i];
      for (int r = 1; r < srcs.n; ++r)
        acc = combine<E, Op>(acc, static_cast<const T*>(srcs.p[r])[i]);
      dst[i] = finish(acc);
    }
  }
}

template <typename E, typename Op>
Status launch_sources(void* dst, const Sources& srcs, std::size_t n, float divisor,
                      cudaStream_t stream) {
  using T = typename E::T;
  bool vec = reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
  for (int r = 0; r < srcs.n; ++r)
    vec = vec && reinterpret_cast<std::uintptr_t>(srcs.p[r]) % 16 == 0;
  auto* d = static_cast<T*>(dst);
  if (vec) {
    reduce_sources_kernel<E, Op, true>
        <<<detail::grid_for(n / (16 / sizeof(T)) + 1, kThreads), kThreads, 0, stream>>>(d, srcs, n,
                                                                                        divisor);
  } else {
    reduce_sources_kernel<E, Op, false>
        <<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(d, srcs, n, divisor);
  }
  return detail::launch_status("gpu reduce_sources");
}

template <typename E>
Status launch_sources_op(void* dst, const Sources& srcs, std::size_t n, ReduceOp op, float divisor,
                         cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return launch_sources<E, OpSum>(dst, srcs, n, divisor, stream);
    case ReduceOp::kProd: return launch_sources<E, OpProd>(dst, srcs, n, divisor, stream);
    case ReduceOp::kMin: return launch_sources<E, OpMin>(dst, srcs, n, divisor, stream);
    case ReduceOp::kMax: return launch_sources<E, OpMax>(dst, srcs, n, divisor, stream);
  }
  return error(StatusCode::kInvalidArgument, "gpu reduce_sources: bad op");
}

}  // namespace

Status reduce_sources(void* d_dst, const void* const* d_srcs, int sources, std::size_t count,
                      DType dtype, ReduceOp op, int divide_by, cudaStream_t stream) {
  if (sources < 1 || sources > kMaxReduceSources) {
    return error(StatusCode::kInvalidArgument, "gpu reduce_sources: " + std::to_string(sources) +
                                                   " sources (1.." +
                                                   std::to_string(kMaxReduceSources) + ")");
  }
  if (count == 0) return Status::ok();
  Sources srcs{};
  srcs.n = sources;
  for (int r = 0; r < sources; ++r) srcs.p[r] = d_srcs[r];
  const float divisor = divide_by > 0 ? static_cast<float>(divide_by) : 0.0f;
  switch (dtype) {
    case DType::kFloat32: return launch_sources_op<F32>(d_dst, srcs, count, op, divisor, stream);
    case DType::kFloat16: return launch_sources_op<F16>(d_dst, srcs, count, op, divisor, stream);
    case DType::kBFloat16: return launch_sources_op<BF16>(d_dst, srcs, count, op, divisor, stream);
    default: break;
  }
  return error(
      StatusCode::kInvalidArgument,
      "gpu reduce_sources: dtype " + std::string(to_string(dtype)) + " is reduced on the CPU only");
}

Status reduce_into(void* d_dst, const void* d_src, std::size_t count, DType dtype, ReduceOp op,
                   cudaStream_t stream) {
  if (count == 0) return Status::ok();
  switch (dtype) {
    case DType::kFloat32: return launch_op<F32>(d_dst, d_src, count, op, stream);
    case DType::kFloat16: return launch_op<F16>(d_dst, d_src, count, op, stream);
    case DType::kBFloat16: return launch_op<BF16>(d_dst, d_src, count, op, stream);
    default: break;
  }
  return error(
      StatusCode::kInvalidArgument,
      "gpu reduce_into: dtype " + std::string(to_string(dtype)) + " is reduced on the CPU only");
}

Status scale_by_count(void* d_data, std::size_t count, DType dtype, int contributors,
                      cudaStream_t stream) {
  if (contributors < 1)
    return error(StatusCode::kInvalidArgument, "gpu scale_by_count: contributors < 1");
  if (count == 0) return Status::ok();
  const unsigned grid = detail::grid_for(count, kThreads);
  const auto divisor = static_cast<float>(contributors);
  switch (dtype) {
    case DType::kFloat32:
      scale_kernel<F32><<<grid, kThreads, 0, stream>>>(static_cast<float*>(d_data), count, divisor);
      break;
    case DType::kFloat16:
      scale_kernel<F16>
          <<<grid, kThreads, 0, stream>>>(static_cast<std::uint16_t*>(d_data), count, divisor);
      break;
    case DType::kBFloat16:
      scale_kernel<BF16>
          <<<grid, kThreads, 0, stream>>>(static_cast<std::uint16_t*>(d_data), count, divisor);
      break;
    default:
      return error(StatusCode::kInvalidArgument, "gpu scale_by_count: dtype " +
                                                     std::string(to_string(dtype)) +
                                                     " is scaled on the CPU only");
  }
  return detail::launch_status("gpu scale_by_count");
}

}  // namespace tributary::gpu
