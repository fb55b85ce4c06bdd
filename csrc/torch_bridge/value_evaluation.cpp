// Values of a traced graph computed again at compile time; see value_evaluation.h.
#include "torch_bridge/value_evaluation.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace kiln::bridge {
using ir::AtenArg;
using ir::AtenNode;
using ir::AtenValue;

const at::Tensor* wrapped_number(const TraceResult& tr, int v) {
  const AtenValue& val = tr.graph.values.at(static_cast<size_t>(v));
  if (val.kind != AtenValue::kConstant) return nullptr;
  const at::Tensor& t = tr.constants.at(static_cast<size_t>(val.index));
  return t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number() ? &t : nullptr;
}

std::optional<at::Tensor> ValueEvaluator::value(int v) {
  auto known = values_.find(v);
  if (known != values_.end()) return known->second;
  const AtenValue& val = tr_.graph.values.at(static_cast<size_t>(v));
  if (val.kind == AtenValue::kInput) return std::nullopt;
  if (val.kind == AtenValue::kConstant) {
    const at::Tensor* t = wrapped_number(tr_, v);
    if (!t) return std::nullopt;
    return values_[v] = *t;
  }
  const AtenNode& n = tr_.graph.nodes.at(static_cast<size_t>(val.index));
  if (n.nondeterministic || n.list_output || ++evaluated_ > kMaxNodes) return std::nullopt;
  const auto dot = n.op.find('.');
  auto op = c10::Dispatcher::singleton().findSchema({n.op.substr(0, dot), dot == std::string::npos ? "" : n.op.substr(dot + 1)});
  if (!op) return std::nullopt;
  std::vector<c10::IValue> stack = tr_.node_args.at(static_cast<size_t>(val.index));
  for (size_t a = 0; a < n.args.size() && a < stack.size(); ++a) {
    if (n.args[a].kind == AtenArg::kTensorList) return std::nullopt;
    if (n.args[a].kind != AtenArg::kTensor) continue;
    std::optional<at::Tensor> t = value(n.args[a].value);
    if (!t) return std::nullopt;
    stack[a] = *t;
  }
  try {
    op->callBoxed(&stack);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  for (size_t o = 0; o < n.outputs.size() && o < stack.size(); ++o)
    if (n.outputs[o] >= 0 && stack[o].isTensor()) values_[n.outputs[o]] = stack[o].toTensor();
  known = values_.find(v);
  return known != values_.end() ? std::optional<at::Tensor>(known->second) : std::nullopt;
}

namespace {

constexpr double kMasked = -65504.0;  // float16's lowest

// The entries a causal mask removes: true above the diagonal of the top-left L x S block.
at::Tensor above_diagonal(const at::Tensor& like, int64_t L, int64_t S) {
  return at::ones({L, S}, like.options().dtype(at::kBool)).triu(1);
}

bool fits(const at::Tensor& t, int64_t L, int64_t S) {
  return t.dim() >= 2 && t.size(-2) == L && t.size(-1) == S && L > 0 && S > 0;
}

}  // namespace

bool is_causal_bias(const at::Tensor& bias, int64_t L, int64_t S) {
  const at::ScalarType t = bias.scalar_type();
  if (t != at::kFloat && t != at::kDouble && t != at::kHalf && t != at::kBFloat16) return false;
  if (!fits(bias, L, S)) return false;
  return at::where(above_diagonal(bias, L, S), bias.le(kMasked), bias.eq(0)).all().item<bool>();
}

bool is_causal_exclusion(const at::Tensor& mask, int64_t L, int64_t S) {
  if (mask.scalar_type() != at::kBool || !fits(mask, L, S)) return false;
  return mask.eq(above_diagonal(mask, L, S)).all().item<bool>();
}

}  // namespace kiln::bridge
