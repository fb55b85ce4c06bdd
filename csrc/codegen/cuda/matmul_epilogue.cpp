// Matmul epilogues on CUDA graphs; see matmul_epilogue.h.
#include "codegen/cuda/matmul_epilogue.h"

#include <string>

namespace kiln::codegen {
using namespace ir;

namespace {

const AtenArg* tensor_arg(const AtenNode& n, size_t i) {
  return i < n.args.size() && n.args[i].kind == AtenArg::kTensor ? &n.args[i] : nullptr;
}

bool is_one(const AtenArg* a) {
  if (!a) return true;  // absent: the default, 1
  if (a->kind == AtenArg::kInt) return a->i == 1;
  if (a->kind == AtenArg::kDouble) return a->d == 1.0;
  return false;
}

// The sizes cuBLASLt's bias epilogue takes in ATen's addmm (a 1-D contiguous bias of the output's
// width, 2-D operands with every size above 1 and below 65535 * 32, a 16/32-bit float type);
// elsewhere _addmm_activation would run as addmm and a separate activation anyway.
bool lt_epilogue_shape(const AtenGraph& g, const AtenNode& mm) {
  const AtenArg *bias = tensor_arg(mm, 0), *a = tensor_arg(mm, 1), *b = tensor_arg(mm, 2);
  if (!bias || !a || !b || !is_one(mm.arg("beta")) || !is_one(mm.arg("alpha"))) return false;
  const TensorMeta &mb = g.values[bias->value].meta, &ma = g.values[a->value].meta, &mB = g.values[b->value].meta;
  const TensorMeta& out = g.values[mm.outputs[0]].meta;
  if (mb.sizes.size() != 1 || ma.sizes.size() != 2 || mB.sizes.size() != 2 || out.sizes.size() != 2) return false;
  if (!mb.is_contiguous() || !out.is_contiguous() || mb.sizes[0] != mB.sizes[1]) return false;
  if (mb.dtype != ma.dtype || ma.dtype != mB.dtype || out.dtype != ma.dtype) return false;
  if (ma.dtype != DType::kBFloat16 && ma.dtype != DType::kFloat16 && ma.dtype != DType::kFloat32) return false;
  constexpr int64_t kMax = 65535LL * 32;
  for (int64_t s : {ma.sizes[0], ma.sizes[1], mB.sizes[0], mB.sizes[1]})
    if (s <= 1 || s >= kMax) return false;
  return !ma.cpu && !mB.cpu && !mb.cpu;
}

}  // namespace

std::vector<EpilogueFusion> fuse_matmul_epilogues(AtenGraph& g) {
  std::vector<EpilogueFusion> done;
  std::vector<int> uses = g.use_counts();
  std::vector<int> producer(g.values.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].outputs)
      if (v >= 0) producer[v] = static_cast<int>(n);
  std::vector<bool> protected_value(g.values.size(), false);  // graph outputs, new input contents
  for (int v : g.outputs) protected_value[v] = true;
  for (auto [input, v] : g.input_mutations) protected_value[v] = true;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    AtenNode& act = g.nodes[n];
    bool gelu = false;
    if (act.op == "aten::gelu") {
      const AtenArg* ap = act.arg("approximate");
      if (!ap || ap->kind != AtenArg::kString || ap->s != "tanh") continue;
      gelu = true;
    } else if (act.op != "aten::relu") {
      continue;
    }
    const AtenArg* in = tensor_arg(act, 0);
    if (!in || act.outputs.size() != 1 || act.outputs[0] < 0 || protected_value[act.outputs[0]]) continue;
    const int x = in->value, out = act.outputs[0];
    if (uses[x] != 1 || protected_value[x] || producer[x] < 0) continue;
    int mm_node = producer[x];
    if (g.nodes[mm_node].op == "aten::view" || g.nodes[mm_node].op == "aten::_unsafe_view") {
      const AtenArg* src = tensor_arg(g.nodes[mm_node], 0);
      if (!src || uses[src->value] != 1 || protected_value[src->value] || producer[src->value] < 0) continue;
      if (!g.values[x].meta.is_contiguous()) continue;
      mm_node = producer[src->value];
    }
    AtenNode& mm = g.nodes[mm_node];
    if (mm.op != "aten::addmm" || mm.outputs.size() != 1 || mm.args.size() != 5 || !lt_epilogue_shape(g, mm)) continue;
    if (g.values[out].meta.dtype != g.values[x].meta.dtype) continue;
    // The matmul now yields the activation; the activation's readers read its input instead.
    mm.op = "aten::_addmm_activation";
    AtenArg flag;
    flag.kind = AtenArg::kBool;
    flag.i = gelu ? 1 : 0;
    flag.name = "use_gelu";
    mm.args.push_back(flag);  // after self, mat1, mat2, beta, alpha
    for (size_t r = n + 1; r < g.nodes.size(); ++r)
      for (AtenArg& a : g.nodes[r].args) {
        if (a.kind == AtenArg::kTensor && a.value == out) a.value = x;
        for (int& v : a.values)
          if (v == out) v = x;
      }
    uses[x] += uses[out];
    uses[out] = 0;
    done.push_back({mm_node, gelu});
  }
  return done;
}

}  // namespace kiln::codegen
