// C++/OpenMP code generation for the loop IR (DESIGN §3, CPU codegen).
//
// A graph's kernels are split into up to `max_units` translation units that compile concurrently
// and link into one library. Each unit is kiln's prefix header, then one
// `extern "C" void kernelN(void**)` per kernel, taking the graph's buffer pointer table, whose
// last entry is the run's error flag (an int). Outer loops run under OpenMP; inner
// pointwise loops carry `omp simd`; reductions along the innermost loop keep 16 independent
// partial accumulators (Welford states for variance) so they vectorize, then fold them.
#pragma once
#include <string>
#include <vector>

#include "ir/loop_ir.h"

namespace kiln::codegen {

std::string prefix_header();
// Sources of the graph's translation units: one per `bytes_per_unit` of source (0: no limit),
// at most `max_units`, at least one.
std::vector<std::string> generate_cpp(const ir::Program& p, int max_units = 1, size_t bytes_per_unit = 0);
// Flags passed to the system compiler (part of the cache key); add -c for an object file.
std::string compile_flags();

}  // namespace kiln::codegen
