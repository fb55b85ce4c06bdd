// Scheduler: where each realized stage runs (DESIGN §3, Inductor's scheduler job).
//
// Stages are placed as lowering realizes them. A stage joins one of the most recent kernels when
// that kernel's outer loops are a prefix of the stage's loop order (by the output's strides) and
// everything the stage reads is ready when that kernel runs: this fuses reductions with their
// epilogues (softmax, layer norm) and independent loops over the same rows horizontally.
// Otherwise it opens a new kernel whose outer loops are all but the innermost dimension.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/loop_ir.h"

namespace kiln::schedule {

// Dimension order for a loop nest over `sizes` writing with `strides`: outermost first, the
// smallest stride innermost (ties keep the original order). Size-1 dims go outermost.
std::vector<int> loop_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

class Placement {
 public:
  explicit Placement(ir::Program& p) : p_(p) {}
  // Tries the open kernels (most recent first) whose outer sizes are a prefix of `sizes`
  // (already in loop order), calling build(kernel, num_outer) until one returns true; otherwise
  // opens a kernel with outer = sizes minus `keep_inner` trailing dims and calls build on it
  // (which must then succeed). Returns the kernel.
  int place(const std::vector<int64_t>& sizes, int min_inner, const std::function<bool(int, int)>& build, bool exact_outer);
  int step_of(int kernel) const { return kernel_step_.at(kernel); }
  bool fuse = true;

 private:
  int open_kernel(std::vector<int64_t> outer);
  ir::Program& p_;
  std::vector<int> open_;          // recent kernels, oldest first
  std::vector<int> kernel_step_;
};

}  // namespace kiln::schedule
