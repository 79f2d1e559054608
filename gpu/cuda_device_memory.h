// DeviceMemory (device_memory.h) on a CUDA device: buffers from cudaMalloc (what legacy
// CUDA IPC can export), handles from cudaIpcGetMemHandle, peers' buffers mapped with
// cudaIpcOpenMemHandle (peer access enabled lazily: the same device, or another one with
// NVLink/PCIe peer access), copies and reductions on one non-blocking stream of its own
// (gpu/reduce.cu's kernels), synchronize() polling that stream against the deadline
// rather than blocking in the driver. Built only with CUDA (TRIBUTARY_WITH_CUDA).
#pragma once

#include <memory>
#include <string>

#include "gpu/device_memory.h"

namespace tributary::gpu {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  // Makes `device` current on the calling thread and creates the stream. kUnavailable
  // without a usable device.
  static Result<std::unique_ptr<CudaDeviceMemory>> create(int device);
  ~CudaDeviceMemory() override;
  CudaDeviceMemory(const CudaDeviceMemory&) = delete;
  CudaDeviceMemory& operator=(const CudaDeviceMemory&) = delete;

  std::string describe() const override { return description_; }
  Result<void*> allocate(std::size_t bytes) override;
  void free(void* buffer) override;
  Result<IpcHandle> export_handle(void* buffer) override;
  Result<void*> open_peer(const IpcHandle& handle) override;
  void close_peer(void* mapped) override;
  Status copy(void* dst, const void* src, std::size_t bytes) override;
  Status reduce_sources(void* dst, std::span<const void* const> srcs, std::size_t count,
                        DType dtype, ReduceOp op, int divide_by) override;
  Status synchronize(Deadline deadline) override;

  // The stream everything is ordered on (a cudaStream_t), for callers that order their
  // own work after it (a torch stream waits on an event recorded here).
  void* stream() const { return stream_; }

 private:
  CudaDeviceMemory(int device, void* stream, std::string description)
      : device_(device), stream_(stream), description_(std::move(description)) {}
  int device_;
  void* stream_;
  std::string description_;
};

}  // namespace tributary::gpu
