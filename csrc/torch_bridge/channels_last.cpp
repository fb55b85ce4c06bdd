// Channels-last tracing of CUDA convolution graphs; see channels_last.h.
#include "torch_bridge/channels_last.h"

#include <ATen/ATen.h>

#include <optional>

#include "schedule/layout_plan.h"

namespace kiln::bridge {

TraceResult plan_channels_last(TraceResult first, const std::vector<at::Tensor>& inputs, const GraphRunner& run) {
  const std::vector<int> convert = schedule::channels_last_inputs(first.graph);
  if (convert.empty()) return first;
  // Per output: the memory format to give it back in (the first trace's), if any.
  std::vector<std::optional<at::MemoryFormat>> formats;
  for (int v : first.graph.outputs) {
    const ir::TensorMeta& m = first.graph.values.at(v).meta;
    if (m.is_contiguous()) formats.push_back(at::MemoryFormat::Contiguous);
    else if (schedule::is_channels_last(m)) formats.push_back(at::MemoryFormat::ChannelsLast);
    else formats.push_back(std::nullopt);
  }
  GraphRunner converted = [&](const std::vector<at::Tensor>& in) {
    std::vector<at::Tensor> args = in;
    for (int i : convert) args.at(i) = args.at(i).contiguous(at::MemoryFormat::ChannelsLast);
    std::vector<at::Tensor> outs = run(args);
    for (size_t k = 0; k < outs.size() && k < formats.size(); ++k)
      if (formats[k] && outs[k].defined() && !outs[k].is_contiguous(*formats[k])) outs[k] = outs[k].contiguous(*formats[k]);
    return outs;
  };
  try {
    return trace(inputs, converted);
  } catch (const std::exception&) {
    return first;
  }
}

}  // namespace kiln::bridge
