// What the C++ shape functions of fast_meta.cpp (elementwise operators) and
// fast_meta_composites.cpp (composite operators) share: their operands, Python numbers, and the
// autograd metadata of their results.
#pragma once
#include <ATen/ATen.h>
#include <Python.h>
#include <c10/core/GradMode.h>

#include <string>
#include <vector>

#include "python/capture_autograd.h"

namespace kiln::frontend::fast_meta {

// A plain meta tensor (exact torch.Tensor, strided, static sizes). One that requires grad is
// noted: the result gets the autograd history eager's would have (with_autograd).
bool meta_operand(PyObject* o, at::Tensor* t);
// A Python bool, int or float, as PyTorch's argument parser passes it to a binary operator.
bool number(PyObject* o, at::Scalar* s);
// The operands that require grad, as meta_operand noted them since the probe began.
std::vector<at::Tensor>& grad_operands();
// attach_capture_autograd (capture_autograd.h) with those operands, which it clears.
bool attach_autograd(at::Tensor& result, bool grad);

// `compute` runs with grad mode off (its meta functions must record nothing); under the caller's
// grad mode its result then gets eager's autograd metadata (attach_autograd), or is undefined
// where it cannot be given here (a view: the Python path then answers).
template <class F>
at::Tensor with_autograd(F compute) {
  const bool grad = c10::GradMode::is_enabled();
  grad_operands().clear();
  at::Tensor result;
  {
    c10::AutoGradMode off(false);
    result = compute();
  }
  if (!attach_autograd(result, grad)) return at::Tensor();
  return result;
}

// The result of a composite operator (softmax, layer_norm, linear, matmul, reductions, conv2d,
// cat...; fast_meta_composites.cpp), or nullptr (no Python error) where the call is not one it
// handles.
PyObject* fast_composite(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs);

}  // namespace kiln::frontend::fast_meta
