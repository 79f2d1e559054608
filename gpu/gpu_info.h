// What the GPU side of Tributary can use on this machine. Every GPU code path and GPU
// test asks here first, so that a build or machine without CUDA says why it skips.
#pragma once

#include <string>

namespace tributary::gpu {

struct GpuInfo {
  bool compiled_with_cuda = false;  // built with nvcc
  int device_count = 0;             // CUDA devices visible to this process
  std::string reason;               // why GPU paths are unavailable; empty when usable
  bool usable() const { return compiled_with_cuda && device_count > 0; }
};

GpuInfo query_gpu();

}  // namespace tributary::gpu
