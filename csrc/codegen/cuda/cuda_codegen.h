// CUDA C++ code generation for the loop IR (DESIGN §2/§3, GPU codegen).
//
// Input: a scheduled, memory-planned ir::Program, the same one the C++ generator renders. Output:
// one CUDA source (kiln's CUDA prefix header, then one `extern "C" __global__` function per
// kernel) and, per kernel, how to launch it. No CUDA or PyTorch headers are needed here: the
// source is compiled at run time by NVRTC (runtime/cuda_compiler.h).
//
// How kernels map to threads, chosen from the kernel's sizes:
//  - pointwise kernels (no reduction stage): each stage is a grid-stride loop over its flattened
//    outer x inner space; where the innermost loop is contiguous in the stored buffer (and the
//    loads that move with it are), each thread handles V consecutive elements with 16-byte
//    vector loads and stores, the last group of a row element by element (tails).
//  - kernels with reductions (row kernels: the fused softmax / layer-norm shape of a reduction
//    followed by stages that read its result): one row (outer index) per thread for short rows
//    and column reductions, per warp (warp shuffles) for rows up to 1024 elements, per block
//    (shuffles, then shared memory) for longer rows. Every thread ends a reduction holding the
//    row's result, which later stages read. mean/var use Welford states; argmax keeps the first
//    position of the best value, as eager does.
// Index math is 32-bit where every index and loop space of the kernel fits (else 64-bit).
// fp16/bf16 are storage types; arithmetic runs in float. An out-of-range indirect index is a
// device-side assertion, as in ATen's CUDA kernels (no host synchronization per call); an integer
// division by a zero divisor sets the run's error flag (the kernel's last parameter), which the
// runtime reads after the graph to rerun that call eagerly (eager's values).
//
// A vectorized kernel also gets a scalar twin (`<name>_scalar`), launched when a vectorized
// buffer's address is not 16-byte aligned at run time (a view with an odd storage offset).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/loop_ir.h"

namespace kiln::codegen {

struct CudaLaunch {
  unsigned grid = 1, block = 1;
};

// How a kernel maps to threads, where autotuning (mode="max-autotune") overrides the choice made
// from its sizes: the row strategy (-1: from the sizes; else row_per_thread 1, row_per_warp 2,
// row_per_block 3; pointwise kernels have one), threads per block (0: the default) and whether
// vector accesses are allowed.
struct CudaConfig {
  int strategy = -1;
  int block = 0;
  bool vectors = true;
  bool row_cache = true;  // row kernels keep a row's repeated vector loads in registers
  bool index64 = false;   // 64-bit index math even where 32 bits would do
};
std::string config_string(const CudaConfig& c);

struct CudaKernel {
  std::string name;              // of the `extern "C" __global__` function
  std::string strategy;          // "pointwise", "row_per_thread", "row_per_warp", "row_per_block"
  CudaLaunch launch;
  std::vector<int> params;       // buffers passed, in parameter order; then the error flag (int*)
  int vector_width = 1;          // elements per vector access (1: none)
  bool index32 = true;           // index math in 32 bits
  std::vector<int> aligned;      // buffers that must be 16-byte aligned for the vector kernel
  std::string scalar_name;       // the scalar twin (when vector_width > 1)
  CudaLaunch scalar_launch;
  bool checks = false;           // may set the error flag (an integer division by a non-constant divisor)
  std::string config;            // "default", or the alternative's configuration (config_string)
  // With autotuning: the same kernel under other configurations, named <name>_t1, _t2, ...
  // (each with its own scalar twin), in the same module; launches may use any of them.
  std::vector<CudaKernel> alternatives;
  // Kernels for runtime sizes: the size symbols s0.. passed after the error flag (in the index
  // type), and the source of the function and of its scalar twin, which a program at other
  // sizes must reproduce to run them (cuda_sized_launches).
  int symbols = 0;
  std::string text, scalar_text;
};

struct CudaModule {
  std::string source;            // prefix header + all kernels
  std::vector<CudaKernel> kernels;  // per ir::Program kernel, same order
  std::vector<std::string> kernel_sources;  // per kernel: its functions (twin, alternatives), no prefix
};

// Runtime sizes (ir/size_template.h, issue 10): the program is one sample of a size template;
// the integers in `spelling` are rendered over the size symbols s0.. (kernel parameters), and
// every decision the generator makes from a spelled size is one that holds at any size (a
// symbolic row length gets tail code and no row cache; the row strategy follows its literal
// factor). Decisions that still depend on the sample's values (vector accesses whose stride is
// a symbolic multiple, 32-bit index math) are checked per size by cuda_sized_launches.
struct CudaSizes {
  ir::IntSpelling spelling;
  int num_symbols = 0;
};

std::string cuda_prefix_header();
// `autotune`: each kernel also gets its alternative configurations (CudaKernel::alternatives);
// without it the source is each kernel in its default configuration. With `sizes`, kernels for
// runtime sizes (no autotuning).
CudaModule generate_cuda(const ir::Program& p, bool autotune = false, const CudaSizes* sizes = nullptr);

// How the kernels generated for runtime sizes (`kernels`, from generate_cuda with sizes) run a
// program `p` of the same template at other sizes (`sizes`: p's spelling): per kernel, its launch
// there and whether the vector kernel or the scalar twin runs. Each kernel is generated again for
// `p`; it serves only where that code is the code of `kernels` (vector kernel, else scalar twin):
// a decision the generator makes differently at these sizes returns nullopt with `why` set, and the
// program is then built for its own sizes.
struct CudaSizedLaunch {
  bool vector = true;  // the vector kernel may run (where its buffers are aligned); else the scalar twin
  CudaLaunch launch, scalar_launch;
};
std::optional<std::vector<CudaSizedLaunch>> cuda_sized_launches(const std::vector<CudaKernel>& kernels, const ir::Program& p, const CudaSizes& sizes,
                                                                 std::string* why);
// The textual form of a kernel's launch record (golden tests, logs):
// "kernel3: row_per_warp grid=128 block=256 vec=4 index32 params=[0, 2, 5]".
std::string launch_string(const CudaKernel& k);

}  // namespace kiln::codegen
