#include "gpu/cuda_device_memory.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <thread>

#include "gpu/cuda_status.h"
#include "gpu/device_reduce.h"

namespace tributary::gpu {
namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes);

}  // namespace

Result<std::unique_ptr<CudaDeviceMemory>> CudaDeviceMemory::create(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();  // clear the sticky-free error of a machine without devices
    return error(StatusCode::kUnavailable, "no CUDA device " + std::to_string(device) + " (" +
                                               std::to_string(count) + " present)");
  }
  TRIB_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  TRIB_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  cudaStream_t stream = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags");
  return std::unique_ptr<CudaDeviceMemory>(new CudaDeviceMemory(
      device, stream, "cuda:" + std::to_string(device) + " (" + prop.name + ")"));
}

CudaDeviceMemory::~CudaDeviceMemory() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(as_stream(stream_));
  cudaStreamDestroy(as_stream(stream_));
}

Result<void*> CudaDeviceMemory::allocate(std::size_t bytes) {
  void* p = nullptr;
  TRIB_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void CudaDeviceMemory::free(void* buffer) {
  cudaStreamSynchronize(as_stream(stream_));
  cudaFree(buffer);
}

Result<IpcHandle> CudaDeviceMemory::export_handle(void* buffer) {
  cudaIpcMemHandle_t h{};
  if (cudaError_t rc = cudaIpcGetMemHandle(&h, buffer); rc != cudaSuccess) {
    return error(StatusCode::kUnavailable, std::string("cudaIpcGetMemHandle: ") +
                                               cudaGetErrorName(rc) + " (" +
                                               cudaGetErrorString(rc) + ")");
  }
  IpcHandle out{};
  std::memcpy(out.data(), &h, kIpcHandleBytes);
  return out;
}

Result<void*> CudaDeviceMemory::open_peer(const IpcHandle& handle) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.data(), kIpcHandleBytes);
  void* p = nullptr;
  if (cudaError_t rc = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
      rc != cudaSuccess) {
    cudaGetLastError();
    return error(StatusCode::kUnavailable, std::string("cudaIpcOpenMemHandle: ") +
                                               cudaGetErrorName(rc) + " (" +
                                               cudaGetErrorString(rc) + ")");
  }
  return p;
}

void CudaDeviceMemory::close_peer(void* mapped) {
  cudaStreamSynchronize(as_stream(stream_));
  cudaIpcCloseMemHandle(mapped);
}

Status CudaDeviceMemory::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return Status::ok();
  return detail::cuda_status(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream_)), "cudaMemcpyAsync");
}

Status CudaDeviceMemory::reduce_sources(void* dst, std::span<const void* const> srcs,
                                        std::size_t count, DType dtype, ReduceOp op,
                                        int divide_by) {
  return gpu::reduce_sources(dst, srcs.data(), static_cast<int>(srcs.size()), count, dtype, op,
                             divide_by, as_stream(stream_));
}

Status CudaDeviceMemory::synchronize(Deadline deadline) {
  // Polled, so that a device that hangs runs into the caller's deadline instead of
  // blocking the thread in the driver.
  for (int spins = 0;; ++spins) {
    const cudaError_t rc = cudaStreamQuery(as_stream(stream_));
    if (rc == cudaSuccess) return Status::ok();
    if (rc != cudaErrorNotReady) return detail::cuda_status(rc, "the IPC stream");
    if (deadline.passed()) {
      return error(StatusCode::kTimedOut, "the CUDA IPC stream did not finish by the deadline");
    }
    if (spins > 64) std::this_thread::yield();
  }
}

}  // namespace tributary::gpu
