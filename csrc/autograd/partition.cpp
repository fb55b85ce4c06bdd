// The default forward/backward partitioner (see partition.h).
#include "autograd/partition.h"

#include "autograd/graph_copy.h"
#include "autograd/min_cut.h"

#include <functional>
#include <stdexcept>
#include <unordered_map>

namespace kiln::autograd {

using ir::AtenGraph;
using ir::AtenNode;
using ir::AtenValue;

namespace {

// Marks every node the given values need (walking producers).
void mark_needed(const AtenGraph& g, const std::vector<int>& values, std::vector<bool>& in_set) {
  std::vector<int> stack;
  for (int v : values)
    if (v >= 0) stack.push_back(v);
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    const AtenValue& val = g.values.at(v);
    if (val.kind != AtenValue::kNodeOutput || in_set[val.index]) continue;
    in_set[val.index] = true;
    for (const auto& a : g.nodes[val.index].args) {
      if (a.kind == ir::AtenArg::kTensor) stack.push_back(a.value);
      for (int x : a.values)
        if (x >= 0) stack.push_back(x);
    }
  }
}

// Copies the chosen nodes into `out`, mapping joint values through `map` (filled for inputs
// beforehand); constants get slots of their own.
void copy_nodes(const AtenGraph& g, const std::vector<int>& nodes, AtenGraph& out, std::unordered_map<int, int>& map,
                std::vector<int>& constants) {
  auto lookup = [&](int v) -> int {
    if (v < 0) return -1;
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    const AtenValue& val = g.values.at(v);
    if (val.kind != AtenValue::kConstant) throw std::runtime_error("partition: value %" + std::to_string(v) + " has no producer in this graph");
    int id = out.add_value(AtenValue::kConstant, static_cast<int>(constants.size()), val.meta);
    constants.push_back(val.index);
    map[v] = id;
    return id;
  };
  for (int n : nodes) append_node_copy(g, g.nodes[n], out, map, lookup);
}

}  // namespace

// The values nodes read (tensor arguments), and the graph outputs in `extra`.
static std::vector<int> values_read(const AtenGraph& g, const std::vector<int>& nodes, const std::vector<int>& extra) {
  std::vector<int> reads;
  for (int b : nodes)
    for (const auto& a : g.nodes[b].args) {
      if (a.kind == ir::AtenArg::kTensor) reads.push_back(a.value);
      for (int x : a.values)
        if (x >= 0) reads.push_back(x);
    }
  for (int v : extra)
    if (v >= 0) reads.push_back(v);
  return reads;
}

// Per node: whether it depends on a tangent (joint inputs past the primals), i.e. belongs to the
// backward. One pass in node order (every argument is defined before its reader).
static std::vector<bool> tangent_dependent_nodes(const AtenGraph& g, int num_primals) {
  std::vector<bool> value_dep(g.values.size(), false), node_dep(g.nodes.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v)
    value_dep[v] = g.values[v].kind == AtenValue::kInput && g.values[v].index >= num_primals;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int r : values_read(g, {static_cast<int>(i)}, {}))
      if (r >= 0 && value_dep[r]) node_dep[i] = true;
    if (node_dep[i])
      for (int o : g.nodes[i].outputs)
        if (o >= 0) value_dep[o] = true;
  }
  return node_dep;
}

JointSplit partition_joint(const AtenGraph& joint, int num_primals, int num_fwd_outputs, Partitioner how) {
  if (!joint.input_mutations.empty()) throw std::runtime_error("the training graph mutates its inputs");
  const int num_outputs = static_cast<int>(joint.outputs.size());
  if (num_fwd_outputs > num_outputs) throw std::runtime_error("partition: more forward outputs than outputs");
  std::vector<int> fwd_out(joint.outputs.begin(), joint.outputs.begin() + num_fwd_outputs);
  std::vector<int> grads(joint.outputs.begin() + num_fwd_outputs, joint.outputs.end());
  for (int v : fwd_out)
    if (joint.values.at(v).kind != AtenValue::kNodeOutput) throw std::runtime_error("a forward output is an input or constant returned as is");

  const size_t n = joint.nodes.size();
  std::vector<bool> fwd(n, false), bwd(n, false);
  // Nodes that raise on bad values (an index out of range) run in the forward even when unused,
  // and so do random ones: eager draws their numbers, and the draws after them depend on it.
  std::vector<int> fwd_roots = fwd_out;
  const std::vector<bool> in_backward = tangent_dependent_nodes(joint, num_primals);
  for (size_t i = 0; i < n; ++i) {
    const AtenNode& node = joint.nodes[i];
    if (!in_backward[i] && (node.nondeterministic || ir::raises_on_values(joint, node)) && !node.outputs.empty() && node.outputs[0] >= 0)
      fwd_roots.push_back(node.outputs[0]);
  }
  mark_needed(joint, fwd_roots, fwd);
  mark_needed(joint, grads, bwd);

  JointSplit s;
  for (size_t i = 0; i < n; ++i) {
    if (fwd[i]) s.forward_nodes.push_back(static_cast<int>(i));
    else if (bwd[i]) s.backward_nodes.push_back(static_cast<int>(i));
  }
  std::vector<int> reads = values_read(joint, s.backward_nodes, grads);
  if (how == Partitioner::kMinCut) {
    // Save the cut; recompute, at the start of the backward, every other forward value it reads.
    std::vector<int> saved = min_cut_saved_values(joint, fwd, reads, num_primals, materialized_in_backward(joint, s.backward_nodes));
    std::vector<bool> is_saved(joint.values.size(), false), recompute(n, false);
    for (int v : saved) is_saved[v] = true;
    std::function<void(int)> need = [&](int v) {
      const AtenValue& val = joint.values.at(v);
      if (val.kind != AtenValue::kNodeOutput || !fwd[val.index] || is_saved[v] || recompute[val.index]) return;
      if (!recomputable(joint.nodes[val.index]))
        throw std::runtime_error("min-cut partition: " + joint.nodes[val.index].op + " would be recomputed");
      recompute[val.index] = true;
      for (int r : values_read(joint, {val.index}, {})) need(r);
    };
    for (int r : reads) need(r);
    std::vector<int> order;
    for (size_t i = 0; i < n; ++i)
      if (recompute[i]) order.push_back(static_cast<int>(i));
    s.num_recomputed = static_cast<int>(order.size());
    order.insert(order.end(), s.backward_nodes.begin(), s.backward_nodes.end());
    s.backward_nodes = std::move(order);
    reads = values_read(joint, s.backward_nodes, grads);
    // Reads of recomputed values are now internal to the backward.
  }
  std::vector<bool> in_bwd(n, false);
  for (int b : s.backward_nodes) in_bwd[b] = true;
  std::vector<bool> seen(joint.values.size(), false);
  std::vector<int> saved_values;
  for (int v : reads) {
    if (v < 0 || seen[v]) continue;
    seen[v] = true;
    const AtenValue& val = joint.values[v];
    if (val.kind == AtenValue::kInput && val.index < num_primals) s.saved_primals.push_back(val.index);
    else if (val.kind == AtenValue::kNodeOutput && fwd[val.index] && !in_bwd[val.index]) saved_values.push_back(v);
  }
  s.num_saved_values = static_cast<int>(saved_values.size());

  // Forward graph.
  std::unordered_map<int, int> fmap;
  for (size_t v = 0; v < joint.values.size(); ++v)
    if (joint.values[v].kind == AtenValue::kInput && joint.values[v].index < num_primals)
      fmap[static_cast<int>(v)] = s.forward.add_value(AtenValue::kInput, joint.values[v].index, joint.values[v].meta);
  s.forward.num_inputs = num_primals;
  copy_nodes(joint, s.forward_nodes, s.forward, fmap, s.forward_constants);
  for (int v : fwd_out) s.forward.outputs.push_back(fmap.at(v));
  for (int v : saved_values) s.forward.outputs.push_back(fmap.at(v));

  // Backward graph: inputs are the saved primals, the saved values, then the tangents.
  std::unordered_map<int, int> bmap;
  int next = 0;
  std::unordered_map<int, int> primal_value;  // primal index -> joint value id
  for (size_t v = 0; v < joint.values.size(); ++v)
    if (joint.values[v].kind == AtenValue::kInput) primal_value[joint.values[v].index] = static_cast<int>(v);
  for (int p : s.saved_primals) {
    int v = primal_value.at(p);
    bmap[v] = s.backward.add_value(AtenValue::kInput, next++, joint.values[v].meta);
  }
  for (int v : saved_values) bmap[v] = s.backward.add_value(AtenValue::kInput, next++, joint.values[v].meta);
  for (int t = num_primals; t < joint.num_inputs; ++t) {
    auto it = primal_value.find(t);
    if (it == primal_value.end()) { ++next; continue; }  // (a tangent no value uses)
    bmap[it->second] = s.backward.add_value(AtenValue::kInput, next++, joint.values[it->second].meta);
  }
  s.backward.num_inputs = next;
  copy_nodes(joint, s.backward_nodes, s.backward, bmap, s.backward_constants);
  for (int v : grads) {
    if (v < 0) throw std::runtime_error("partition: undefined gradient output");
    auto it = bmap.find(v);
    if (it == bmap.end()) throw std::runtime_error("partition: a gradient is neither computed by the backward nor read by it");
    s.backward.outputs.push_back(it->second);
  }
  return s;
}

std::string JointSplit::describe() const {
  std::string s = "saved: primals [";
  for (size_t i = 0; i < saved_primals.size(); ++i) s += (i ? ", " : "") + std::to_string(saved_primals[i]);
  s += "], " + std::to_string(num_saved_values) + " values (";
  const size_t first = forward.outputs.size() - num_saved_values;
  for (size_t i = first; i < forward.outputs.size(); ++i)
    s += (i > first ? ", " : "") + forward.values[forward.outputs[i]].meta.to_string();
  return s + "); forward " + std::to_string(forward_nodes.size()) + " nodes, backward " + std::to_string(backward_nodes.size()) +
         " nodes (" + std::to_string(num_recomputed) + " recomputed)";
}

}  // namespace kiln::autograd
