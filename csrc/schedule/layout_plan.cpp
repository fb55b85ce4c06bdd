// Layout planning for CUDA convolutions; see layout_plan.h.
#include "schedule/layout_plan.h"

#include <functional>
#include <set>

namespace kiln::schedule {
using namespace ir;

namespace {

bool is_convolution(const std::string& op) {
  return op == "aten::convolution" || op == "aten::_convolution" || op == "aten::cudnn_convolution";
}

bool floating(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

}  // namespace

bool is_nchw(const TensorMeta& m) {
  return m.sizes.size() == 4 && !m.cpu && floating(m.dtype) && m.is_contiguous() && m.sizes[1] > 1 && m.sizes[2] * m.sizes[3] > 1;
}

bool is_channels_last(const TensorMeta& m) {
  if (m.sizes.size() != 4 || m.strides.size() != 4) return false;
  const auto& s = m.sizes;
  const auto& st = m.strides;
  return (s[1] == 1 || st[1] == 1) && (s[3] == 1 || st[3] == s[1]) && (s[2] == 1 || st[2] == s[3] * s[1]) &&
         (s[0] == 1 || st[0] == s[2] * s[3] * s[1]);
}

std::vector<int> channels_last_inputs(const AtenGraph& g) {
  if (!g.input_mutations.empty()) return {};
  for (const AtenNode& n : g.nodes)
    if (n.nondeterministic) return {};
  for (int v : g.outputs)
    if (v >= 0 && g.values[view_chain(g, v).back()].kind == AtenValue::kInput) return {};
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int o : g.nodes[i].outputs)
      if (o >= 0) producer[o] = static_cast<int>(i);
  std::set<int> chosen, seen;
  auto take_input = [&](int v) {
    const AtenValue& val = g.values[v];
    if (val.kind == AtenValue::kInput && is_nchw(val.meta)) chosen.insert(val.index);
  };
  // The graph inputs of the convolution input's shape that it is computed from.
  std::function<void(int, const std::vector<int64_t>&)> walk = [&](int v, const std::vector<int64_t>& sizes) {
    if (v < 0 || !seen.insert(v).second || g.values[v].meta.sizes != sizes) return;
    take_input(v);
    if (producer[v] < 0) return;
    for (const AtenArg& a : g.nodes[producer[v]].args)
      if (a.kind == AtenArg::kTensor) walk(a.value, sizes);
  };
  for (const AtenNode& n : g.nodes) {
    if (!is_convolution(n.op) || n.args.size() < 2 || n.args[0].kind != AtenArg::kTensor || n.args[1].kind != AtenArg::kTensor) continue;
    const TensorMeta& in = g.values[n.args[0].value].meta;
    if (!is_nchw(in)) continue;
    walk(n.args[0].value, in.sizes);
    take_input(n.args[1].value);
  }
  return std::vector<int>(chosen.begin(), chosen.end());
}

}  // namespace kiln::schedule
