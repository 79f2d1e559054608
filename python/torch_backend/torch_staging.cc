#include "python/torch_backend/torch_staging.h"

namespace tributary::python::torch_backend {

#ifndef TRIBUTARY_TORCH_HAS_CUDA
std::unique_ptr<TensorDeviceOps> make_cuda_device_ops(c10::Device) { return nullptr; }
bool built_with_cuda() { return false; }
#endif

TensorStaging::TensorStaging(const std::vector<at::Tensor>& all, const char* what) {
  const at::Tensor* first_cuda = nullptr;
  const at::Tensor* first_cpu = nullptr;
  for (const at::Tensor& t : all) {
    if (t.is_cuda()) {
      if (first_cuda == nullptr) first_cuda = &t;
      TORCH_CHECK(t.device() == first_cuda->device(), "tributary: ", what, " names tensors on ",
                  first_cuda->device(), " and on ", t.device(), "; one operation takes one device");
    } else {
      TORCH_CHECK(t.device().is_cpu(), "tributary: ", what, " has a ", t.device(),
                  " tensor; this backend takes CPU and CUDA tensors");
      if (first_cpu == nullptr) first_cpu = &t;
    }
  }
  if (first_cuda == nullptr) return;
  TORCH_CHECK(first_cpu == nullptr, "tributary: ", what, " mixes CPU and ",
              first_cuda->device(), " tensors; pass them all on one device");
  device_ = first_cuda->device();
  std::unique_ptr<TensorDeviceOps> ops = make_cuda_device_ops(*device_);
  TORCH_CHECK(ops != nullptr, "tributary: ", what, " has a CUDA tensor but this build of the "
              "backend has no CUDA support (it was built against a torch without CUDA)");
  ops_ = ops.get();
  staging_ = std::make_shared<DeviceStaging>(std::move(ops));
}

at::Tensor TensorStaging::stage(const at::Tensor& t, Access access) {
  if (!staging_) return t;
  const std::size_t slot = ops_->add(t);
  staging_->stage(slot, access);
  return ops_->host(slot);
}

std::vector<at::Tensor> TensorStaging::read(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : ts) out.push_back(read(t));
  return out;
}

std::vector<at::Tensor> TensorStaging::write(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : ts) out.push_back(write(t));
  return out;
}

std::vector<at::Tensor> TensorStaging::read_write(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : ts) out.push_back(read_write(t));
  return out;
}

Staged TensorStaging::seal() {
  if (!staging_) return {};
  staging_->seal();
  return {staging_, {*device_}};
}

}  // namespace tributary::python::torch_backend
