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
//
// With `sizes`, the program is one sample of a template for runtime sizes (ir/size_template.h):
// the integers it spells are rendered as C++ over `s0`, `s1`..., which each kernel reads from the
// table entry after the error flag (an `int64_t` array, one value per symbol). Without it, every
// integer is a literal, as for a static-shape graph.
struct SizeSymbols {
  ir::IntSpelling spelling;
  int num_symbols = 0;
};
std::vector<std::string> generate_cpp(const ir::Program& p, int max_units = 1, size_t bytes_per_unit = 0,
                                      const SizeSymbols* sizes = nullptr);
// Flags passed to the system compiler (part of the cache key); add -c for an object file.
std::string compile_flags();

}  // namespace kiln::codegen
