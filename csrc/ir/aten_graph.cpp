// Printing and small queries on the traced ATen graph.
#include "ir/aten_graph.h"

#include <set>

#include "support/str_builder.h"

namespace kiln::ir {
using support::StrBuilder;

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorMeta::is_contiguous() const {
  int64_t expected = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

std::string TensorMeta::to_string() const {
  StrBuilder b;
  b << dtype_name(dtype) << "[";
  b.join(sizes);
  b << "]{";
  b.join(strides);
  b << "}";
  if (storage_offset) b << "+" << storage_offset;
  if (!cpu) b << "@device";
  return b.str();
}

std::string AtenArg::to_string() const {
  StrBuilder b;
  switch (kind) {
    case kNone: b << "None"; break;
    case kTensor: b << "%" << value; break;
    case kInt: b << i; break;
    case kDouble: b << d; break;
    case kBool: b << (i ? "True" : "False"); break;
    case kString: b << "'" << s << "'"; break;
    case kDType: b << dtype_name(static_cast<DType>(i)); break;
    case kOther: b << s; break;
    case kIntList: case kBoolList: b << "["; b.join(ints); b << "]"; break;
    case kDoubleList: b << "["; b.join(doubles); b << "]"; break;
    case kTensorList:
      b << "[";
      for (size_t k = 0; k < values.size(); ++k) {
        b << (k ? ", " : "");
        if (values[k] < 0) b << "None"; else b << "%" << values[k];
      }
      b << "]";
      break;
  }
  return b.str();
}

const AtenArg* AtenNode::arg(const std::string& name) const {
  for (const auto& a : args)
    if (a.name == name) return &a;
  return nullptr;
}

int AtenGraph::add_value(AtenValue::Kind kind, int index, TensorMeta meta) {
  AtenValue v;
  v.kind = kind;
  v.index = index;
  v.meta = std::move(meta);
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

std::string AtenGraph::to_string() const {
  StrBuilder b;
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v].kind == AtenValue::kInput) b << "%" << v << " = input " << values[v].index << " : " << values[v].meta.to_string() << "\n";
    if (values[v].kind == AtenValue::kConstant) b << "%" << v << " = constant " << values[v].index << " : " << values[v].meta.to_string() << "\n";
  }
  for (const auto& n : nodes) {
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      b << (k ? ", " : "");
      if (n.outputs[k] < 0) b << "_"; else b << "%" << n.outputs[k];
    }
    b << " = " << n.op << "(";
    for (size_t k = 0; k < n.args.size(); ++k) {
      const AtenArg& a = n.args[k];
      if (k) b << ", ";
      if (k && !a.name.empty()) b << a.name << "=";  // rules look arguments up by name
      b << a.to_string();
    }
    b << ")";
    const char* sep = " : ";
    for (int v : n.outputs)
      if (v >= 0) b << sep << values[v].meta.to_string(), sep = ", ";
    if (n.grad_fn >= 0) b << " in grad_fn " << n.grad_fn;
    b << "\n";
  }
  b << "return ";
  for (size_t k = 0; k < outputs.size(); ++k) b << (k ? ", " : "") << "%" << outputs[k];
  b << "\n";
  for (auto [input, value] : input_mutations) b << "mutates input " << input << " := %" << value << "\n";
  return b.str();
}

std::vector<int> AtenGraph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const auto& n : nodes)
    for (const auto& a : n.args) {
      if (a.kind == AtenArg::kTensor) ++uses[a.value];
      for (int v : a.values)
        if (v >= 0) ++uses[v];
    }
  for (int v : outputs) ++uses[v];
  for (auto [input, value] : input_mutations) ++uses[value];
  return uses;
}

bool is_view_operator(const std::string& op) {
  static const std::set<std::string> views = {
      "aten::select", "aten::slice", "aten::view", "aten::as_strided", "aten::t", "aten::transpose", "aten::permute",
      "aten::unsqueeze", "aten::squeeze", "aten::expand", "aten::alias", "aten::diagonal", "aten::narrow", "aten::unfold",
      "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::_reshape_alias", "aten::view_as_real",
      "aten::view_as_complex", "aten::detach", "aten::numpy_T", "aten::movedim", "aten::swapaxes", "aten::reshape",
      "aten::_unsafe_view"};
  return views.count(op.substr(0, op.find('.'))) > 0;
}

std::vector<int> view_chain(const AtenGraph& g, int v) {
  std::vector<int> chain = {v};
  while (v >= 0 && chain.size() <= 64 && g.values.at(v).kind == AtenValue::kNodeOutput) {
    const AtenNode& n = g.nodes.at(g.values[v].index);
    if (!is_view_operator(n.op) || n.args.empty() || n.args[0].kind != AtenArg::kTensor) break;
    v = n.args[0].value;
    chain.push_back(v);
  }
  return chain;
}

bool raises_on_values(const AtenGraph& g, const AtenNode& n) {
  const std::string base = n.op.substr(0, n.op.find('.'));
  static const char* const indexing[] = {"aten::embedding", "aten::index_select", "aten::gather", "aten::index", "aten::take",
                                         "aten::scatter", "aten::scatter_add", "aten::scatter_reduce", "aten::index_add",
                                         "aten::index_copy", "aten::index_put", "aten::index_fill", "aten::nll_loss_forward",
                                         "aten::nll_loss2d_forward", "aten::one_hot"};
  for (const char* op : indexing)
    if (base == op) return true;
  // Integer floor/trunc division and remainders: kernels check for a zero divisor.
  if (base != "aten::floor_divide" && base != "aten::div" && base != "aten::remainder" && base != "aten::fmod") return false;
  if (n.outputs.empty() || n.outputs[0] < 0) return false;
  DType out = g.values.at(n.outputs[0]).meta.dtype;
  return !is_floating(out) && out != DType::kBool;
}

}  // namespace kiln::ir
