// Lowering rules for reads at tensor-valued positions: embedding, index_select, gather. The
// source is realized into a buffer and read through an indirect load (loop_ir.h), so the index
// computation and everything downstream fuse into one loop; out-of-range positions raise
// IndexError at run time, as in eager.
#include "lowering/lowerer.h"

namespace kiln::lowering {
using namespace ir;

// What an indirect load adds to a value's cost on the CPU: its position's computation, a bounds
// check and a load the loop cannot vectorize. As much as the most an inlined value read twice
// may cost (LoweringOptions::max_inline_cost): a gathered value that more than one kernel reads
// (an embedding read by the first norm and by each residual add after it) is gathered once, into
// a buffer, instead of again in each reader. On a GPU a gather is a plain load, and a buffer
// costs a kernel launch: there it stays cheap to inline.
static int indirect_load_cost(const Lowerer& L) { return L.cuda() ? 4 : 48; }

bool lower_indexing(Lowerer& L, const AtenNode& n) {
  auto tensor = [&](size_t i) { return n.args.size() > i && n.args[i].kind == AtenArg::kTensor; };
  if (!tensor(0) || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const int x = n.args[0].value, out = n.outputs[0];
  const int64_t rank = static_cast<int64_t>(L.meta(x).sizes.size());
  Lowerer* Lp = &L;
  auto is_index = [&](int v) { DType t = L.meta(v).dtype; return t == DType::kInt64 || t == DType::kInt32; };

  if (n.op == "aten::embedding" && tensor(1) && rank == 2 && is_index(n.args[1].value)) {
    const int pos = n.args[1].value;
    const size_t pr = L.meta(pos).sizes.size();
    L.ensure_buffer(x);
    L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> pi(i.begin(), i.begin() + pr);
      return Lp->indirect_load(x, {Index::of(0), i[pr]}, 0, Lp->value(pos).loader(pi, c), c);
    }, L.value(pos).cost + indirect_load_cost(L));
    return true;
  }
  if (n.op == "aten::index_select" && tensor(2) && is_index(n.args[2].value) && rank > 0) {
    const int pos = n.args[2].value;
    int64_t dim = n.args[1].i < 0 ? n.args[1].i + rank : n.args[1].i;
    if (L.meta(pos).sizes.size() > 1) return false;
    L.ensure_buffer(x);
    L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
      std::vector<Index> pi;
      if (!Lp->meta(pos).sizes.empty()) pi.push_back(i[dim]);
      return Lp->indirect_load(x, i, static_cast<int>(dim), Lp->value(pos).loader(pi, c), c);
    }, L.value(pos).cost + indirect_load_cost(L));
    return true;
  }
  if (n.op == "aten::gather" && tensor(2) && is_index(n.args[2].value) && rank > 0 &&
      L.meta(n.args[2].value).sizes.size() == static_cast<size_t>(rank)) {
    const int pos = n.args[2].value;
    int64_t dim = n.args[1].i < 0 ? n.args[1].i + rank : n.args[1].i;
    if (const AtenArg* sg = n.arg("sparse_grad"); sg && sg->i) return false;
    L.ensure_buffer(x);
    L.define(out, [=](const std::vector<Index>& i, LoadCtx& c) {
      return Lp->indirect_load(x, i, static_cast<int>(dim), Lp->value(pos).loader(i, c), c);
    }, L.value(pos).cost + indirect_load_cost(L));
    return true;
  }
  return false;
}

}  // namespace kiln::lowering
