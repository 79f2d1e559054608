// CUDA's DeviceOps (torch_staging.h), built when the torch the backend is built against has
// CUDA. Written against c10's device-generic streams and events (c10::Stream, c10::Event,
// VirtualGuardImpl), as torch's ProcessGroupGloo stages its CUDA tensors: no CUDA header and
// no CUDA runtime call of its own, so it builds with the CUDA runtime torch brings and runs
// with the CUDA guard that libc10_cuda registers.
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>
#include <thread>

#include "python/torch_backend/torch_staging.h"

namespace tributary::python::torch_backend {
namespace {

class CudaDeviceOps final : public TensorDeviceOps {
 public:
  explicit CudaDeviceOps(c10::Device device)
      : device_(device),
        impl_(device.type()),
        // A pooled stream, not the caller's: the copies and the collective's wait stay off
        // the streams the training computes on (high priority: the copies are short).
        side_(impl_.getStreamFromGlobalPool(device, /*isHighPriority=*/true)),
        producer_(device.type()),
        staged_(device.type()),
        done_(device.type()) {}

  std::size_t add(const at::Tensor& device_tensor) override {
    at::Tensor host = at::empty(device_tensor.sizes(),
                                device_tensor.options().device(at::kCPU).pinned_memory(true));
    // The side stream uses the tensor after the caller may have dropped it: the caching
    // allocator must not hand its memory out before the side stream is done with it.
    impl_.recordDataPtrOnStream(device_tensor.storage().data_ptr(), side_);
    slots_.push_back({device_tensor, std::move(host)});
    return slots_.size() - 1;
  }
  const at::Tensor& host(std::size_t slot) const override { return slots_.at(slot).host; }

  void side_stream_waits_for_caller() override {
    producer_.record(impl_.getStream(device_));
    producer_.block(side_);
  }
  void copy_to_host(std::size_t slot) override {
    c10::StreamGuard on_side(side_);
    slots_.at(slot).host.copy_(slots_[slot].device, /*non_blocking=*/true);
  }
  void record_staged() override { staged_.record(side_); }

  Status wait_staged(Deadline deadline) override {
    // Polled rather than cudaEventSynchronize: the wait has a deadline, and it is this one
    // event, never the device or another stream.
    try {
      for (int polls = 0; !staged_.query(); ++polls) {
        if (deadline.passed()) {
          return error(StatusCode::kTimedOut,
                       "the device tensors' copies to pinned host memory did not finish before "
                       "the operation's deadline");
        }
        if (polls < 64) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      }
      return Status::ok();
    } catch (const std::exception& e) {
      return error(StatusCode::kInternal,
                   std::string("copying device tensors to pinned host memory: ") + e.what());
    }
  }
  void copy_to_device(std::size_t slot) override {
    c10::StreamGuard on_side(side_);
    slots_.at(slot).device.copy_(slots_[slot].host, /*non_blocking=*/true);
  }
  void record_done() override { done_.record(side_); }
  void with_side_stream_current(const std::function<void()>& fn) override {
    c10::StreamGuard on_side(side_);
    fn();
  }
  void caller_waits_for_done() override { done_.block(impl_.getStream(device_)); }

 private:
  struct Slot {
    at::Tensor device;
    at::Tensor host;  // pinned
  };

  c10::Device device_;
  c10::impl::VirtualGuardImpl impl_;
  c10::Stream side_;
  c10::Event producer_;
  c10::Event staged_;
  c10::Event done_;
  std::vector<Slot> slots_;
};

}  // namespace

std::unique_ptr<TensorDeviceOps> make_cuda_device_ops(c10::Device device) {
  return std::make_unique<CudaDeviceOps>(device);
}

bool built_with_cuda() { return true; }

}  // namespace tributary::python::torch_backend
