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
    // The output, the values it is a view of, and the input they start from.
    const std::vector<int> chain = view_chain(g, g.outputs[k]);
    const int root = chain.back();
    if (chain.size() < 2 || root < 0 || g.values.at(root).kind != AtenValue::kInput) continue;
    const int input = g.values[root].index;
    if (input < 0 || static_cast<size_t>(input) >= inputs.size() || !inputs[input].defined()) continue;
    at::Tensor t = inputs[input];
    bool ok = true;
    // Each view operator from the input on: chain[i] is made from chain[i + 1].
    for (size_t i = chain.size() - 1; ok && i-- > 0;) {
      const int node = g.values[chain[i]].index, base = chain[i + 1], made = chain[i];
      const AtenNode& n = g.nodes[node];
      const auto dot = n.op.find('.');
      auto op = c10::Dispatcher::singleton().findSchema({n.op.substr(0, dot), dot == std::string::npos ? "" : n.op.substr(dot + 1)});
      if (!op) { ok = false; break; }
      std::vector<c10::IValue> stack = tr.node_args.at(node);
      for (size_t a = 0; a < n.args.size() && a < stack.size(); ++a) {
        if (n.args[a].kind == AtenArg::kTensor) {
          if (n.args[a].value != base) ok = false;  // a view of two tensors: not replayed
          stack[a] = t;
        } else if (n.args[a].kind == AtenArg::kTensorList) {
          ok = false;
        }
      }
      if (!ok) break;
      op->callBoxed(&stack);
      // This node's result on the chain: its only output, or the one of a list (split, unbind).
      size_t pos = 0;
      while (pos < n.outputs.size() && n.outputs[pos] != made) ++pos;
      if (stack.empty() || pos == n.outputs.size()) { ok = false; break; }
      if (stack[0].isTensor() && pos == 0) t = stack[0].toTensor();
      else if (stack[0].isTensorList() && pos < stack[0].toTensorList().size()) t = stack[0].toTensorList().get(pos);
      else ok = false;
    }
    if (ok && same_layout(t, outputs[k])) outputs[k] = t;
  }
}

}  // namespace kiln::runtime
