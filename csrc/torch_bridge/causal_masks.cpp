// Causal attention masks replaced by `is_causal`; see causal_masks.h.
#include "torch_bridge/causal_masks.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <map>
#include <optional>
#include <string>

namespace kiln::bridge {
using ir::AtenArg;
using ir::AtenNode;
using ir::AtenValue;

namespace {

// The SDPA backends that take an additive bias, and the name of that argument. (Flash attention
// on CUDA takes none; the math backend is decomposed before the tracer sees it.)
const char* bias_argument(const std::string& op) {
  if (op == "aten::_scaled_dot_product_flash_attention_for_cpu") return "attn_mask";
  if (op == "aten::_scaled_dot_product_efficient_attention" || op == "aten::_scaled_dot_product_cudnn_attention") return "attn_bias";
  return nullptr;
}

int position(const AtenNode& n, const char* name) {
  const AtenArg* a = n.arg(name);
  return a ? static_cast<int>(a - n.args.data()) : -1;
}

// Values computed from sizes alone, evaluated with ATen (each node once; a mask is a handful of
// them, so a long chain is not one).
class SizeOnlyValues {
 public:
  explicit SizeOnlyValues(const TraceResult& tr) : tr_(tr) {}

  std::optional<at::Tensor> value(int v) {
    auto known = values_.find(v);
    if (known != values_.end()) return known->second;
    const AtenValue& val = tr_.graph.values.at(static_cast<size_t>(v));
    if (val.kind == AtenValue::kInput) return std::nullopt;
    if (val.kind == AtenValue::kConstant) {
      // A Python number the graph turned into a tensor; anything else it closes over (a buffer,
      // a parameter) may change between calls.
      const at::Tensor& t = tr_.constants.at(static_cast<size_t>(val.index));
      if (t.dim() != 0 || !t.unsafeGetTensorImpl()->is_wrapped_number()) return std::nullopt;
      return values_[v] = t;
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

 private:
  static constexpr int kMaxNodes = 64;
  const TraceResult& tr_;
  std::map<int, at::Tensor> values_;
  int evaluated_ = 0;
};

// A masked entry: at most float16's lowest value, -65504, which is what PyTorch's cuDNN path
// turns a boolean mask into (bfloat16 and float32 masks hold their own lowest value, or -inf).
// Its softmax weight, exp(score + bias - row max), is zero in float32 unless the row's scores
// differ by more than 65,000 (float16 scores cannot).
constexpr double kMasked = -65504.0;

// Whether `bias` (broadcast over batch and heads) is SDPA's causal mask for L queries and S keys:
// zero on and below the diagonal of the top-left L x S block, masked above it.
bool is_causal_bias(const at::Tensor& bias, int64_t L, int64_t S) {
  const at::ScalarType t = bias.scalar_type();
  if (t != at::kFloat && t != at::kDouble && t != at::kHalf && t != at::kBFloat16) return false;
  if (bias.dim() < 2 || bias.size(-2) != L || bias.size(-1) != S || L == 0 || S == 0) return false;
  const at::Tensor allowed = at::ones({L, S}, bias.options().dtype(at::kBool)).tril();
  return at::where(allowed, bias.eq(0), bias.le(kMasked)).all().item<bool>();
}

}  // namespace

int use_causal_attention(TraceResult& trace) {
  ir::AtenGraph& g = trace.graph;
  // The calls that may change: forward SDPA without dropout, not yet causal, with a bias.
  std::vector<int> candidates;
  std::map<int, int> candidate_reads;  // bias value -> how many candidates read it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const AtenNode& n = g.nodes[i];
    const char* bias = bias_argument(n.op);
    if (!bias) continue;
    const AtenArg* b = n.arg(bias);
    const AtenArg* causal = n.arg("is_causal");
    const AtenArg* dropout = n.arg("dropout_p");
    if (!b || b->kind != AtenArg::kTensor || !causal || causal->i != 0 || !dropout || dropout->d != 0) continue;
    if (n.args.size() < 2 || n.args[0].kind != AtenArg::kTensor || n.args[1].kind != AtenArg::kTensor) continue;
    candidates.push_back(static_cast<int>(i));
    ++candidate_reads[b->value];
  }
  if (candidates.empty()) return 0;
  const std::vector<int> uses = g.use_counts();
  SizeOnlyValues values(trace);
  std::map<int, bool> causal_bias;  // per bias value read only by candidates: whether it is causal
  int changed = 0;
  for (int i : candidates) {
    AtenNode& n = g.nodes[static_cast<size_t>(i)];
    const int bias_pos = position(n, bias_argument(n.op)), causal_pos = position(n, "is_causal");
    const int bias = n.args[static_cast<size_t>(bias_pos)].value;
    if (uses.at(static_cast<size_t>(bias)) != candidate_reads[bias]) continue;  // also read elsewhere
    auto known = causal_bias.find(bias);
    if (known == causal_bias.end()) {
      const auto& q = g.values.at(static_cast<size_t>(n.args[0].value)).meta.sizes;
      const auto& k = g.values.at(static_cast<size_t>(n.args[1].value)).meta.sizes;
      // The check holds a few byte masks of the bias's size beside it: a mask over more than 2^28
      // elements (16k x 16k positions) is left alone rather than risk the memory at compile time.
      const bool small = g.values.at(static_cast<size_t>(bias)).meta.numel() <= (int64_t{1} << 28);
      bool causal = false;
      if (small && q.size() >= 2 && k.size() >= 2) {
        try {
          std::optional<at::Tensor> t = values.value(bias);
          causal = t && is_causal_bias(*t, q[q.size() - 2], k[k.size() - 2]);
        } catch (const std::exception&) {
          causal = false;
        }
      }
      known = causal_bias.emplace(bias, causal).first;
    }
    if (!known->second) continue;
    std::vector<c10::IValue>& boxed = trace.node_args.at(static_cast<size_t>(i));
    AtenArg& b = n.args[static_cast<size_t>(bias_pos)];
    b.kind = AtenArg::kNone;
    b.value = -1;
    n.args[static_cast<size_t>(causal_pos)].i = 1;
    if (static_cast<size_t>(bias_pos) < boxed.size()) boxed[static_cast<size_t>(bias_pos)] = c10::IValue();
    if (static_cast<size_t>(causal_pos) < boxed.size()) boxed[static_cast<size_t>(causal_pos)] = c10::IValue(true);
    ++changed;
  }
  return changed;
}

}  // namespace kiln::bridge
