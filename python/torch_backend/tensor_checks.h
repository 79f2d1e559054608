// Checks of the tensors a backend operation is given, shared by the collectives
// (backend_ops.cc) and the point-to-point operations (point_to_point_ops.cc): bad input
// raises at the call, before anything is queued or posted.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace tributary::python::torch_backend {

// A dense, contiguous tensor (where it lives is TensorStaging's check, once for all of an
// operation's tensors); `what` names it in the error.
void check_dense(const at::Tensor& t, const char* what);

// The one tensor of a per-process list (torch's lists carry one tensor per device), dense.
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what);

}  // namespace tributary::python::torch_backend
