// The device-memory seam of the CUDA IPC path (ipc_all_reduce.h): what a collective that
// reduces straight out of its peers' device buffers needs from a device, and nothing else.
// CudaDeviceMemory (cuda_device_memory.h) implements it with the CUDA runtime
// (cudaIpcGetMemHandle / cudaIpcOpenMemHandle, one stream, gpu/reduce.cu's kernels);
// HostDeviceMemory (host_device_memory.h) with shared host memory, so that the handle
// exchange, the ordering and the fallback run in CI on machines without a GPU, across real
// processes.
//
// Every operation that moves or reduces bytes is ordered on the memory's one stream and
// may return before it is done; synchronize() is where the host waits. Errors are values:
// an operation that cannot be started says why (kUnavailable for an IPC handle that cannot
// be opened or made, kInternal for a device error), and a failure that only shows when the
// stream runs shows in synchronize().
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tributary::gpu {

// A buffer's IPC handle as it travels to a peer: opaque bytes (cudaIpcMemHandle_t is 64).
inline constexpr std::size_t kIpcHandleBytes = 64;
using IpcHandle = std::array<std::byte, kIpcHandleBytes>;

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // What it is, for logs ("cuda:0 (NVIDIA H100 80GB HBM3)", "host memory (no device)").
  virtual std::string describe() const = 0;

  // A device buffer other processes on this host can map (export_handle), at least
  // `bytes` long.
  virtual Result<void*> allocate(std::size_t bytes) = 0;
  virtual void free(void* buffer) = 0;
  // The handle of a buffer allocate() returned.
  virtual Result<IpcHandle> export_handle(void* buffer) = 0;
  // Maps a peer's buffer (its export_handle) into this process; close_peer() unmaps it.
  virtual Result<void*> open_peer(const IpcHandle& handle) = 0;
  virtual void close_peer(void* mapped) = 0;

  // ---- stream-ordered ----
  // dst <- src, `bytes` bytes; either may be a peer's mapped buffer.
  virtual Status copy(void* dst, const void* src, std::size_t bytes) = 0;
  // dst[i] = srcs[0][i] (op) srcs[1][i] (op) ..., in source order, core/reduce.h's
  // semantics to the bit (each pairwise step rounded as reduce_into rounds it); then, when
  // `divide_by` > 0, divided once as scale_by_count(divide_by) (kAvg). At most
  // kMaxSources sources; dst may alias srcs[0] exactly, no other.
  static constexpr int kMaxSources = 8;
  virtual Status reduce_sources(void* dst, std::span<const void* const> srcs, std::size_t count,
                                DType dtype, ReduceOp op, int divide_by) = 0;
  // The host waits for everything ordered so far, until `deadline` (kTimedOut then).
  virtual Status synchronize(Deadline deadline) = 0;
};

}  // namespace tributary::gpu
