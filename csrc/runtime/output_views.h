// The first call of a graph returns its traced run's results. The tracer computes on functional
// wrappers of the inputs, so a result that eager returns as a view of an input (`return x[1]`,
// `x.t()`) shares the input's memory but is not a view of it: no _base, its own version
// counter, so an in-place write through it would not mark the input modified for autograd.
// remake_input_views makes such results again as real views, replaying the traced view
// operators on the caller's tensor (as CompiledGraph does on later calls).
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "torch_bridge/tracer.h"

namespace kiln::runtime {

void remake_input_views(const bridge::TraceResult& tr, const std::vector<at::Tensor>& inputs, std::vector<at::Tensor>& outputs);

}  // namespace kiln::runtime
