// Structural zeros for absent tangents (see absent_tangents.h).
#include "autograd/absent_tangents.h"

#include "autograd/graph_copy.h"

#include <set>
#include <string>
#include <unordered_map>

namespace kiln::autograd {

using ir::AtenArg;
using ir::AtenGraph;
using ir::AtenNode;
using ir::AtenValue;

namespace {

// How an operator maps zero arguments.
enum class ZeroRule {
  kNone,        // not known: a zero argument is materialised
  kFirstArg,    // linear in its first tensor argument (views, reductions, casts, mul/div by a scalar)
  kAnyArg,      // a product of its tensor arguments: zero when any of them is
  kAllArgs,     // a sum or a selection of its tensor arguments: zero when all of them are
  kGradArg,     // a `*_backward` operator: zero when its gradient argument is
  kFirstArgFillZero,  // masked_fill: zero when its input is and the value it fills in is 0
};

ZeroRule rule_of(const std::string& op) {
  static const std::set<std::string> first_arg = {
      "aten::neg", "aten::clone", "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::expand",
      "aten::permute", "aten::t", "aten::transpose", "aten::squeeze", "aten::unsqueeze", "aten::select", "aten::slice",
      "aten::narrow", "aten::as_strided", "aten::alias", "aten::contiguous", "aten::_to_copy", "aten::to", "aten::sum",
      "aten::mean", "aten::index_select", "aten::gather", "aten::flip", "aten::roll", "aten::repeat", "aten::cumsum",
      "aten::diagonal", "aten::unfold", "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unbind",
      "aten::view_copy", "aten::expand_copy", "aten::permute_copy", "aten::t_copy", "aten::transpose_copy",
      "aten::unsqueeze_copy", "aten::squeeze_copy", "aten::select_copy", "aten::slice_copy", "aten::alias_copy",
      "aten::diagonal_copy", "aten::zeros_like", "aten::conj", "aten::_conj", "aten::real", "aten::view_as_real",
      "aten::view_as_complex", "aten::detach", "aten::tril", "aten::triu", "aten::sum_to_size", "aten::movedim"};
  static const std::set<std::string> any_arg = {"aten::mm", "aten::bmm", "aten::matmul", "aten::dot", "aten::mv", "aten::outer",
                                                "aten::vdot", "aten::_unsafe_index"};
  // Overloads whose every tensor argument is summed or selected (add.Scalar adds a number: not here).
  static const std::set<std::string> all_args = {"aten::add.Tensor", "aten::sub.Tensor", "aten::cat", "aten::stack", "aten::where.self"};
  const std::string base = op.substr(0, op.find('.'));
  const std::string overload = op.find('.') == std::string::npos ? "" : op.substr(op.find('.') + 1);
  if (base == "aten::mul") return overload == "Scalar" ? ZeroRule::kFirstArg : ZeroRule::kAnyArg;
  if (base == "aten::div" || base == "aten::true_divide") return ZeroRule::kFirstArg;  // the numerator
  // masked_fill(x, mask, 0) is zero where x is (std's and norm's backward guard a division by zero
  // this way; a zero materialised before it went on into a product with inf: NaN).
  if (op == "aten::masked_fill.Scalar") return ZeroRule::kFirstArgFillZero;
  if (first_arg.count(base)) return ZeroRule::kFirstArg;
  if (any_arg.count(base)) return ZeroRule::kAnyArg;
  if (all_args.count(op)) return ZeroRule::kAllArgs;
  if (base.size() > 9 && base.compare(base.size() - 9, 9, "_backward") == 0) return ZeroRule::kGradArg;
  if (base.find("_backward_data") != std::string::npos) return ZeroRule::kGradArg;
  return ZeroRule::kNone;
}

bool is_grad_arg(const AtenArg& a) { return a.name == "grad_output" || a.name == "grad" || a.name == "grad_out"; }

// Tensor values an argument reads.
std::vector<int> reads(const AtenArg& a) {
  if (a.kind == AtenArg::kTensor) return {a.value};
  if (a.kind == AtenArg::kTensorList) {
    std::vector<int> r;
    for (int v : a.values)
      if (v >= 0) r.push_back(v);
    return r;
  }
  return {};
}

// Whether the node's outputs are zero given which of its (original) arguments are.
bool output_is_zero(const AtenNode& n, const std::vector<bool>& zero) {
  ZeroRule rule = rule_of(n.op);
  if (rule == ZeroRule::kNone) return false;
  bool any = false, all = true, first_done = false, first_zero = false, grad_zero = false;
  for (const AtenArg& a : n.args) {
    if (rule == ZeroRule::kAllArgs && a.name == "condition") continue;  // where's mask selects, it is not summed
    for (int v : reads(a)) {
      any |= zero[v];
      all &= zero[v];
      if (!first_done) { first_zero = zero[v]; first_done = true; }
      if (is_grad_arg(a)) grad_zero |= zero[v];
    }
  }
  switch (rule) {
    case ZeroRule::kFirstArg: return first_zero;
    case ZeroRule::kAnyArg: return any;
    case ZeroRule::kAllArgs: return any && all;
    case ZeroRule::kGradArg: return grad_zero;
    case ZeroRule::kFirstArgFillZero: {
      const AtenArg* value = n.arg("value");
      const bool fills_zero = value && ((value->kind == AtenArg::kDouble && value->d == 0.0) || (value->kind == AtenArg::kInt && value->i == 0) ||
                                        (value->kind == AtenArg::kBool && value->i == 0));
      return first_zero && fills_zero;
    }
    case ZeroRule::kNone: break;
  }
  return false;
}

}  // namespace

PrunedBackward prune_absent_tangents(const AtenGraph& g, int first_tangent, const std::vector<bool>& present) {
  std::vector<bool> zero(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) {
    const AtenValue& val = g.values[v];
    if (val.kind != AtenValue::kInput || val.index < first_tangent) continue;
    size_t k = static_cast<size_t>(val.index - first_tangent);
    zero[v] = k >= present.size() || !present[k];
  }
  // Per value: whether it depends on any tangent (a gradient), on a given one (a defined gradient).
  std::vector<bool> grad(g.values.size(), false), given(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].kind == AtenValue::kInput && g.values[v].index >= first_tangent) grad[v] = true, given[v] = !zero[v];
  std::vector<bool> node_grad(g.nodes.size(), false);
  std::unordered_map<int, bool> fn_given;  // per autograd node: whether any of its operators reads a defined gradient
  // A node that runs defines every gradient it returns, also one its formula makes from nothing
  // (copysign's `zeros_like(other)`): a later node that reads it runs in eager, and its input gets
  // a zero gradient, not None. Such a result may come before the operator that reads the defined
  // gradient, so this repeats until nothing changes (given only ever turns true).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const AtenNode& n = g.nodes[i];
      bool any_grad = false, any_given = false;
      for (const AtenArg& a : n.args)
        for (int v : reads(a)) any_grad |= grad[v], any_given |= given[v];
      node_grad[i] = any_grad;
      if (n.grad_fn >= 0 && any_given && !fn_given[n.grad_fn]) fn_given[n.grad_fn] = changed = true;
      const bool defined = any_given || (n.grad_fn >= 0 && fn_given[n.grad_fn]);
      for (int o : n.outputs)
        if (o >= 0) {
          grad[o] = any_grad;
          if (defined && !given[o]) given[o] = changed = true;
        }
    }
  }
  // Which nodes are zero, in order (a node's arguments come before it).
  std::vector<bool> node_zero(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const AtenNode& n = g.nodes[i];
    node_zero[i] = (n.grad_fn >= 0 && node_grad[i] && !fn_given[n.grad_fn]) || output_is_zero(n, zero);
    if (node_zero[i])
      for (int o : n.outputs)
        if (o >= 0) zero[o] = true;
  }
  // Live nodes: those the non-zero outputs need (walking producers through non-zero nodes).
  std::vector<bool> live(g.nodes.size(), false);
  std::vector<int> stack;
  for (int v : g.outputs)
    if (v >= 0 && !zero[v]) stack.push_back(v);
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    const AtenValue& val = g.values.at(v);
    if (val.kind != AtenValue::kNodeOutput || live[val.index] || node_zero[val.index]) continue;
    live[val.index] = true;
    for (const AtenArg& a : g.nodes[val.index].args)
      for (int x : reads(a))
        if (!zero[x]) stack.push_back(x);
  }

  PrunedBackward r;
  AtenGraph& out = r.graph;
  out.num_inputs = g.num_inputs;
  std::unordered_map<int, int> map, zeros_of;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].kind != AtenValue::kNodeOutput)
      map[static_cast<int>(v)] = out.add_value(g.values[v].kind, g.values[v].index, g.values[v].meta);
  // A zero value read by a node that needs it as a tensor: an aten::zeros of its dtype and sizes.
  auto materialise = [&](int v) {
    auto it = zeros_of.find(v);
    if (it != zeros_of.end()) return it->second;
    const ir::TensorMeta& m = g.values[v].meta;
    ir::TensorMeta meta;
    meta.dtype = m.dtype;
    meta.sizes = m.sizes;
    meta.strides.assign(m.sizes.size(), 1);
    for (int d = static_cast<int>(m.sizes.size()) - 2; d >= 0; --d)
      meta.strides[d] = meta.strides[d + 1] * std::max<int64_t>(m.sizes[d + 1], 1);
    meta.cpu = m.cpu;
    AtenNode z;
    z.op = "aten::zeros";
    AtenArg size;
    size.kind = AtenArg::kIntList;
    size.name = "size";
    size.ints = m.sizes;
    AtenArg dtype;
    dtype.kind = AtenArg::kDType;
    dtype.name = "dtype";
    dtype.i = static_cast<int64_t>(m.dtype);
    z.args = {size, dtype};
    for (const char* name : {"layout", "device", "pin_memory"}) {
      AtenArg none;
      none.name = name;
      z.args.push_back(none);
    }
    int id = static_cast<int>(out.nodes.size());
    int nv = out.add_value(AtenValue::kNodeOutput, id, meta);
    z.outputs = {nv};
    out.nodes.push_back(std::move(z));
    r.origin.push_back(-1);
    zeros_of[v] = nv;
    return nv;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    append_node_copy(g, g.nodes[i], out, map, [&](int v) { return zero[v] ? materialise(v) : map.at(v); });
    r.origin.push_back(static_cast<int>(i));
  }
  for (int v : g.outputs) {
    bool z = v >= 0 && zero[v];
    r.zero_output.push_back(z);
    if (!z) out.outputs.push_back(v >= 0 ? map.at(v) : -1);
  }
  return r;
}

}  // namespace kiln::autograd
