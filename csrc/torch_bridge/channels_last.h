// Channels-last tracing of CUDA convolution graphs (torch_bridge side of schedule/layout_plan.h).
//
// The graph is traced a second time with the inputs the layout plan names converted to
// channels-last at its start, so every value after them takes the layout ATen gives it for such
// inputs. Outputs keep the layout of the first trace (an output that was contiguous is made
// contiguous at the graph's end): the caller sees eager's strides.
#pragma once
#include <vector>

#include "torch_bridge/tracer.h"

namespace kiln::bridge {

// `first`, or where schedule::channels_last_inputs() names inputs, the graph (runner `run`)
// traced again with those inputs converted. A second trace that fails leaves `first`.
TraceResult plan_channels_last(TraceResult first, const std::vector<at::Tensor>& inputs, const GraphRunner& run);

}  // namespace kiln::bridge
