// Causal attention masks replaced by `is_causal`; see causal_masks.h.
#include "torch_bridge/causal_masks.h"

#include <map>
#include <string>

#include "torch_bridge/value_evaluation.h"

namespace kiln::bridge {
using ir::AtenArg;
using ir::AtenNode;

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
  ValueEvaluator values(trace);
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
