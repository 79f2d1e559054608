// The tensors of one torch backend operation as its host collective sees them: CPU tensors as
// they are, CUDA tensors through pinned host twins staged on a side stream (DeviceStaging,
// device_staging.h, with CUDA's DeviceOps from cuda_device_ops.cc).
//
// Contract:
//  - One device per operation: every tensor an operation names (inputs and outputs) is on
//    the CPU, or every one is on the same CUDA device; a mix is refused at the call with an
//    error that says so, before anything is queued.
//  - read() / write() / read_write() return the tensor the host collective uses in place of
//    the given one (the tensor itself on the CPU; a pinned host twin of the same dtype and
//    shape for a CUDA tensor, copied from it at the call if read, copied back to it after a
//    collective that succeeded if written). Call them before seal(), in any order.
//  - seal() ends the staging: what the operation's Work and its queued job share.
//  - A build against a torch without CUDA refuses CUDA tensors (torch could not make one).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "python/torch_backend/device_staging.h"

namespace tributary::python::torch_backend {

// DeviceOps over torch tensors: add() makes a device tensor's pinned host twin, the next slot.
class TensorDeviceOps : public DeviceOps {
 public:
  virtual std::size_t add(const at::Tensor& device_tensor) = 0;
  virtual const at::Tensor& host(std::size_t slot) const = 0;
};

// CUDA's, on `device` (cuda_device_ops.cc, built when torch has CUDA); null in a build
// without.
std::unique_ptr<TensorDeviceOps> make_cuda_device_ops(c10::Device device);
// Whether this build stages CUDA tensors (torch had CUDA when it was built).
bool built_with_cuda();

// What a sealed operation hands its Work and its job: no staging for CPU tensors.
struct Staged {
  std::shared_ptr<DeviceStaging> staging;
  std::vector<c10::Device> devices;  // the Work's Future's devices: none for CPU tensors
};

class TensorStaging {
 public:
  // `all`: every tensor the operation names; `what` names the operation in errors.
  TensorStaging(const std::vector<at::Tensor>& all, const char* what);

  at::Tensor read(const at::Tensor& t) { return stage(t, Access::kRead); }
  at::Tensor write(const at::Tensor& t) { return stage(t, Access::kWrite); }
  at::Tensor read_write(const at::Tensor& t) { return stage(t, Access::kReadWrite); }
  std::vector<at::Tensor> read(const std::vector<at::Tensor>& ts);
  std::vector<at::Tensor> write(const std::vector<at::Tensor>& ts);
  std::vector<at::Tensor> read_write(const std::vector<at::Tensor>& ts);

  Staged seal();

 private:
  at::Tensor stage(const at::Tensor& t, Access access);

  std::optional<c10::Device> device_;  // set for CUDA tensors
  TensorDeviceOps* ops_ = nullptr;     // owned by staging_
  std::shared_ptr<DeviceStaging> staging_;
};

}  // namespace tributary::python::torch_backend
