// Graph outputs that are views of inputs, made again on the first call; see output_views.h.
#include "runtime/output_views.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace kiln::runtime {
using namespace ir;

namespace {

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() && a.storage_offset() == b.storage_offset() && a.dtype() == b.dtype() &&
         a.device() == b.device();
}

}  // namespace

void remake_input_views(const bridge::TraceResult& tr, const std::vector<at::Tensor>& inputs, std::vector<at::Tensor>& outputs) {
  const AtenGraph& g = tr.graph;
  for (size_t k = 0; k < outputs.size() && k < g.outputs.size(); ++k) {
    // The chain of view operators from an input to this output, last first.
    std::vector<int> chain;
    int v = g.outputs[k];
    while (v >= 0 && g.values.at(v).kind == AtenValue::kNodeOutput && chain.size() < 64) {
      const AtenNode& n = g.nodes.at(g.values[v].index);
      if (!is_view_operator(n.op) || n.args.empty() || n.args[0].kind != AtenArg::kTensor) break;
      chain.push_back(g.values[v].index);
      v = n.args[0].value;
    }
    if (chain.empty() || v < 0 || g.values.at(v).kind != AtenValue::kInput) continue;
    const int input = g.values[v].index;
    if (input < 0 || static_cast<size_t>(input) >= inputs.size() || !inputs[input].defined()) continue;
    at::Tensor t = inputs[input];
    int value = v;
    bool ok = true;
    for (auto it = chain.rbegin(); ok && it != chain.rend(); ++it) {
      const AtenNode& n = g.nodes[*it];
      const std::string& name = n.op;
      const auto dot = name.find('.');
      auto op = c10::Dispatcher::singleton().findSchema({name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1)});
      if (!op) { ok = false; break; }
      std::vector<c10::IValue> stack = tr.node_args.at(*it);
      for (size_t a = 0; a < n.args.size() && a < stack.size(); ++a) {
        if (n.args[a].kind == AtenArg::kTensor) {
          if (n.args[a].value != value) ok = false;  // a view of two tensors: not replayed
          stack[a] = t;
        } else if (n.args[a].kind == AtenArg::kTensorList) {
          ok = false;
        }
      }
      if (!ok) break;
      op->callBoxed(&stack);
      // This node's result on the chain: its only output, or the one of a list (split, unbind).
      const int next = it + 1 != chain.rend() ? g.nodes[*(it + 1)].args[0].value : g.outputs[k];
      size_t pos = 0;
      while (pos < n.outputs.size() && n.outputs[pos] != next) ++pos;
      if (stack.empty() || pos == n.outputs.size()) { ok = false; break; }
      if (stack[0].isTensor() && pos == 0) t = stack[0].toTensor();
      else if (stack[0].isTensorList() && pos < stack[0].toTensorList().size()) t = stack[0].toTensorList().get(pos);
      else ok = false;
      value = next;
    }
    if (ok && same_layout(t, outputs[k])) outputs[k] = t;
  }
}

}  // namespace kiln::runtime
