// Internal to gpu/: CUDA runtime errors as Status values, and launch geometry.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/status.h"

namespace tributary::gpu::detail {

inline Status cuda_status(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return Status::ok();
  return error(StatusCode::kInternal, std::string(what) + ": " + cudaGetErrorName(rc) + " (" +
                                          cudaGetErrorString(rc) + ")");
}

// Checks the launch that just happened (configuration errors; faults show up later).
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

// Multiprocessors of the current device (a cheap attribute read, no synchronisation).
inline int sm_count() {
  int device = 0;
  int sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 1;
  }
  return sms > 0 ? sms : 1;
}

// Blocks for a grid-stride loop over `work` items of `per_block` each: enough to fill the
// device several times over (latency hiding), never more than the work needs.
inline unsigned grid_for(unsigned long long work, unsigned per_block, int blocks_per_sm = 8) {
  const unsigned long long need = (work + per_block - 1) / per_block;
  const unsigned long long cap = static_cast<unsigned long long>(sm_count()) * blocks_per_sm;
  const unsigned long long g = need < cap ? need : cap;
  return g == 0 ? 1u : static_cast<unsigned>(g);
}

}  // namespace tributary::gpu::detail

#define TRIB_CUDA_RETURN_IF_ERROR(expr, what) \
  TRIB_RETURN_IF_ERROR(::tributary::gpu::detail::cuda_status((expr), (what)))
