#include <cuda_runtime.h>

#include <string>

namespace tributary::gpu {

int cuda_device_count(std::string* error) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    *error = cudaGetErrorString(rc);
    return 0;
  }
  if (count == 0) *error = "cudaGetDeviceCount returned 0";
  return count;
}

}  // namespace tributary::gpu
