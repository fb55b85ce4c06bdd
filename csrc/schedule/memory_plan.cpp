// Last-use analysis for buffer release; see memory_plan.h.
#include "schedule/memory_plan.h"

#include <functional>
#include <map>
#include <set>

namespace kiln::schedule {
using namespace ir;

// A kernel-written buffer takes over the memory of one released at an earlier step with the same
// dtype and element count (an exact fit, so any dense layout fits). Extern results are ATen's
// own allocations and may alias; they neither give nor take.
static void plan_reuse(Program& p) {
  p.reuse_of.assign(p.buffers.size(), -1);
  std::multimap<std::pair<int, int64_t>, int> pool;  // (dtype, numel) -> released buffer
  auto key = [&](int b) { return std::make_pair(static_cast<int>(p.buffers[b].dtype), p.buffers[b].numel()); };
  const auto allocs = kernel_allocations(p);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    for (int b : p.steps[s].kind == Step::kKernel ? allocs[p.steps[s].kernel] : std::vector<int>{}) {
      if (p.buffers[b].numel() == 0) continue;
      auto it = pool.find(key(b));
      if (it == pool.end()) continue;
      p.reuse_of[b] = it->second;
      pool.erase(it);
    }
    for (int b : p.frees[s])
      if (p.buffers[b].kind == Buffer::kKernelOutput && p.buffers[b].numel() > 0) pool.insert({key(b), b});
  }
}

void plan_memory(Program& p) {
  std::vector<int> last(p.buffers.size(), -1);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    std::set<int> used;
    const Step& st = p.steps[s];
    if (st.kind == Step::kKernel) {
      for (const Stage& g : p.kernels[st.kernel].stages) {
        loaded_buffers(g.value, used);
        for (int b : stage_outputs(g)) used.insert(b);
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
  plan_reuse(p);
}

}  // namespace kiln::schedule
