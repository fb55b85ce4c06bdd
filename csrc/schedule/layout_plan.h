// Layout planning: which graph inputs a CUDA graph converts to channels-last (DESIGN §3).
//
// cuDNN runs 2-D convolutions on recent GPUs in NHWC. Fed NCHW tensors, it transposes the input
// and the weight before each convolution and the output after it (ResNet-18, fp32, batch 32 on
// an H100: 0.45 of 1.6 ms of device time went to those transposes). A CUDA inference graph whose
// convolutions read NCHW tensors is therefore traced again with the graph inputs that feed them
// converted to channels-last at its start (torch_bridge/channels_last.h): every later value then
// has the layout ATen gives it for such inputs, so the convolutions' outputs and the batch
// norms, activations, poolings and additions after them are channels-last, the generated
// kernels read and write NHWC, and cuDNN gets the layout it runs in.
#pragma once
#include <vector>

#include "ir/aten_graph.h"

namespace kiln::schedule {

// The graph inputs to convert (positions, ascending): those a 4-D convolution reads as its
// weight, or as its input directly or through operators with outputs of the input's shape,
// where that convolution's input is NCHW on a CUDA device. Empty (keep the layouts) when there
// is none, or the graph writes an input, draws random numbers or returns a view of an input.
std::vector<int> channels_last_inputs(const ir::AtenGraph& g);

// NCHW-contiguous 4-D floating-point tensor on a CUDA device, with more than one channel and more
// than one pixel (where the two layouts differ).
bool is_nchw(const ir::TensorMeta& m);
bool is_channels_last(const ir::TensorMeta& m);

}  // namespace kiln::schedule
