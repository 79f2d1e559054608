// DeviceMemory (device_memory.h) over host memory, for machines without a GPU: a buffer is a
// POSIX shared-memory object, its handle the object's name, and a peer process maps it by
// that name, so the IPC all-reduce's handle exchange, mapping and ordering run across real
// processes in CI. The "stream" is the calling thread: every operation is done when it
// returns, and synchronize() has nothing to wait for. Reductions are core/reduce.h's.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "gpu/device_memory.h"

namespace tributary::gpu {

class HostDeviceMemory final : public DeviceMemory {
 public:
  HostDeviceMemory() = default;
  ~HostDeviceMemory() override;  // unmaps and unlinks whatever is left
  HostDeviceMemory(const HostDeviceMemory&) = delete;
  HostDeviceMemory& operator=(const HostDeviceMemory&) = delete;

  std::string describe() const override { return "host memory (no device)"; }
  Result<void*> allocate(std::size_t bytes) override;
  void free(void* buffer) override;
  Result<IpcHandle> export_handle(void* buffer) override;
  Result<void*> open_peer(const IpcHandle& handle) override;
  void close_peer(void* mapped) override;
  Status copy(void* dst, const void* src, std::size_t bytes) override;
  Status reduce_sources(void* dst, std::span<const void* const> srcs, std::size_t count,
                        DType dtype, ReduceOp op, int divide_by) override;
  Status synchronize(Deadline deadline) override;

 private:
  struct Mapping {
    std::size_t bytes = 0;
    std::string name;  // this process's own objects: unlinked when freed
  };
  std::mutex mu_;
  std::map<void*, Mapping> mappings_;
};

}  // namespace tributary::gpu
