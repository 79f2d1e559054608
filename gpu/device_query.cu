#include <cuda_runtime.h>

#include <string>

namespace tributary::gpu {

int cuda_device_count(std::string* error) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    int driver = 0;
    int runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    *error = cudaGetErrorString(rc);
    if (driver == 0) {
      *error += " (no CUDA driver loaded: no GPU on this machine, or libcuda is missing)";
    } else if (driver < runtime) {
      *error += " (driver supports CUDA " + std::to_string(driver) + ", runtime is " +
                std::to_string(runtime) + ")";
    }
    return 0;
  }
  if (count == 0) *error = "cudaGetDeviceCount returned 0";
  return count;
}

}  // namespace tributary::gpu
