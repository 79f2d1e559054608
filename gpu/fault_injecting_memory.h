// A DeviceMemory that fails on purpose, around a real one: the injected CUDA IPC failure
// of the fallback tests (tests/gpu/ipc_all_reduce_test.cc) and of the device run
// (gpu_ipc_bench --inject-failure). Counts the stream operations (copies and reductions) and fails
// the one with 1-based index `fail_op` (0: never) with kInternal, as a device error would; or
// refuses to map peers' buffers (`fail_open_peer`), as a driver without peer access does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/device_memory.h"

namespace tributary::gpu {

class FaultInjectingMemory final : public DeviceMemory {
 public:
  explicit FaultInjectingMemory(DeviceMemory& inner) : inner_(inner) {}

  std::uint64_t fail_op = 0;
  bool fail_open_peer = false;
  std::uint64_t ops() const { return ops_; }

  std::string describe() const override { return inner_.describe() + " (failures injected)"; }
  Result<void*> allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void free(void* buffer) override { inner_.free(buffer); }
  Result<IpcHandle> export_handle(void* buffer) override { return inner_.export_handle(buffer); }
  Result<void*> open_peer(const IpcHandle& handle) override {
    if (fail_open_peer)
      return error(StatusCode::kUnavailable, "injected: peer buffer cannot be mapped");
    return inner_.open_peer(handle);
  }
  void close_peer(void* mapped) override { inner_.close_peer(mapped); }
  Status copy(void* dst, const void* src, std::size_t bytes) override {
    if (Status st = count_op("copy"); !st.is_ok()) return st;
    return inner_.copy(dst, src, bytes);
  }
  Status reduce_sources(void* dst, std::span<const void* const> srcs, std::size_t count,
                        DType dtype, ReduceOp op, int divide_by) override {
    if (Status st = count_op("reduction"); !st.is_ok()) return st;
    return inner_.reduce_sources(dst, srcs, count, dtype, op, divide_by);
  }
  Status synchronize(Deadline deadline) override { return inner_.synchronize(deadline); }

 private:
  Status count_op(const char* what) {
    if (++ops_ != fail_op) return Status::ok();
    return error(StatusCode::kInternal,
                 std::string("injected: device ") + what + " " + std::to_string(ops_) + " failed");
  }
  DeviceMemory& inner_;
  std::uint64_t ops_ = 0;
};

}  // namespace tributary::gpu
