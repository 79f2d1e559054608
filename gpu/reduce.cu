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

}  // namespace

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
