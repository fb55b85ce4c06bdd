// C++/OpenMP code generation for the loop IR (DESIGN §3, CPU codegen).
//
// One source file per graph: kiln's prefix header, then one `extern "C" void kernelN(void**)`
// per kernel, taking the graph's buffer pointer table. Outer loops run under OpenMP; inner
// pointwise loops carry `omp simd`; reductions along the innermost loop keep 16 independent
// partial accumulators (Welford states for variance) so they vectorize, then fold them.
#pragma once
#include <string>

#include "ir/loop_ir.h"

namespace kiln::codegen {

std::string prefix_header();
std::string generate_cpp(const ir::Program& p);
// Flags passed to the system compiler (part of the cache key).
std::string compile_flags();

}  // namespace kiln::codegen
