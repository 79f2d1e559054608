#include "gpu/gpu_info.h"

namespace tributary::gpu {

#if defined(TRIBUTARY_WITH_CUDA)
int cuda_device_count(std::string* error);  // device_query.cu

GpuInfo query_gpu() {
  GpuInfo info;
  info.compiled_with_cuda = true;
  std::string error;
  info.device_count = cuda_device_count(&error);
  if (info.device_count == 0) info.reason = "no CUDA device visible: " + error;
  return info;
}
#else
GpuInfo query_gpu() {
  GpuInfo info;
  info.reason = "built without CUDA (nvcc was not found at configure time)";
  return info;
}
#endif

}  // namespace tributary::gpu
