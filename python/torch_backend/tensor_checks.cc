#include "python/torch_backend/tensor_checks.h"

namespace tributary::python::torch_backend {

void check_dense(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.layout() == c10::kStrided, "tributary: ", what, " is not a dense tensor",
              t.is_sparse() ? " (sparse tensors: all_reduce only)" : "");
  TORCH_CHECK(t.is_contiguous(), "tributary: ", what, " is not contiguous (sizes ", t.sizes(),
              ", strides ", t.strides(), "); pass .contiguous()");
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "tributary: ", what, ": one tensor per process, got ",
              tensors.size());
  check_dense(tensors[0], what);
  return tensors[0];
}

}  // namespace tributary::python::torch_backend
