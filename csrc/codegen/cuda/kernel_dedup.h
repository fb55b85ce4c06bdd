// Kernels of one CUDA module that are the same code (hf_llama: each of its 8 layers has the same
// norm, RoPE and residual kernels, 45 kernels of which 13 differ). NVRTC's time grows with the
// source it is given (~0.2 s per kernel on the H200's host), so a duplicate is not compiled: it
// runs its first occurrence's function, with its own buffers.
#pragma once
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"

namespace kiln::codegen {

// A kernel's functions (kernel_sources[k]) up to the names of its buffers and its own name:
// comments dropped, the kernel's name (and the names it prefixes: _scalar, _t1...) and every
// buffer identifier b<N> renamed in order of first appearance. Two kernels with the same
// canonical text are the same code with their parameters in the same order. Text with a quote
// character is kept as it is (no comment can be told from string contents without parsing).
std::string canonical_kernel_text(const std::string& source, const std::string& name);

// Per kernel of `m`: the first kernel with the same canonical text (itself where none precedes it).
std::vector<int> same_kernels(const CudaModule& m);

}  // namespace kiln::codegen
