// Copying a node of one ATen graph into another: what the partitioner and the absent-tangent
// pass both do, each with its own rule for where an argument's value comes from.
#pragma once
#include <unordered_map>
#include <utility>

#include "ir/aten_graph.h"

namespace kiln::autograd {

// Appends `n` (a node of `from`) to `out`: each tensor argument (list items that are None
// aside) becomes `value(id)`; each output gets a new value with from's meta, recorded in `map`
// (from's id -> out's). Returns the new node's id.
template <typename ValueOf>
int append_node_copy(const ir::AtenGraph& from, ir::AtenNode n, ir::AtenGraph& out, std::unordered_map<int, int>& map, ValueOf&& value) {
  for (ir::AtenArg& a : n.args) {
    if (a.kind == ir::AtenArg::kTensor) a.value = value(a.value);
    for (int& x : a.values)
      if (x >= 0) x = value(x);
  }
  const int id = static_cast<int>(out.nodes.size());
  for (int& o : n.outputs) {
    if (o < 0) continue;
    const int nv = out.add_value(ir::AtenValue::kNodeOutput, id, from.values.at(o).meta);
    map[o] = nv;
    o = nv;
  }
  out.nodes.push_back(std::move(n));
  return id;
}

}  // namespace kiln::autograd
