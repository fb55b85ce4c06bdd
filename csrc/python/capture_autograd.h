// Autograd metadata of capture-time meta results (defined in fast_meta.cpp).
#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace kiln::frontend {

// Under grad mode `grad`, a floating `result` of `operands` that require grad gets eager's
// autograd metadata (requires grad, not a leaf) through a node that is never run: the capture
// only reads that metadata. False where it cannot be given here (a view).
bool attach_capture_autograd(at::Tensor& result, const std::vector<at::Tensor>& operands, bool grad);

}  // namespace kiln::frontend
