// Last-use analysis for buffer release; see memory_plan.h.
#include "schedule/memory_plan.h"

#include <functional>
#include <set>

namespace kiln::schedule {
using namespace ir;

static void reads_of(const ExprPtr& e, std::set<int>& out) {
  if (e->kind == Expr::kLoad) out.insert(e->buffer);
  for (const auto& a : e->args) reads_of(a, out);
  for (const auto& i : e->indirect) reads_of(i.value, out);
}

void plan_memory(Program& p) {
  std::vector<int> last(p.buffers.size(), -1);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    std::set<int> used;
    const Step& st = p.steps[s];
    if (st.kind == Step::kKernel) {
      for (const Stage& g : p.kernels[st.kernel].stages) {
        reads_of(g.value, used);
        if (g.kind == Stage::kPointwise) used.insert(g.out_buffer);
        for (int b : g.store_buffers)
          if (b >= 0) used.insert(b);
      }
    } else {
      for (int b : st.args)
        if (b >= 0) used.insert(b);
      for (int b : st.outputs)
        if (b >= 0) used.insert(b);
    }
    for (int b : used) last[b] = static_cast<int>(s);
  }
  std::set<int> keep(p.outputs.begin(), p.outputs.end());
  for (auto [input, b] : p.input_mutations) keep.insert(b);
  p.frees.assign(p.steps.size(), {});
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& buf = p.buffers[b];
    if (buf.kind == Buffer::kInput || buf.kind == Buffer::kConstant || keep.count(static_cast<int>(b)) || last[b] < 0) continue;
    p.frees[last[b]].push_back(static_cast<int>(b));
  }
}

}  // namespace kiln::schedule
