// Compiling generated CUDA source to a cubin with NVRTC, through an on-disk cache next to the CPU
// kernel cache (DESIGN §2: NVRTC at run time, no nvcc). Built only when PyTorch has CUDA
// (KILN_WITH_CUDA); NVRTC is reached through ATen's lazily loaded stub, so kiln links no CUDA
// library and a CPU-only machine never loads one.
//
// <cache>/<key>.cubin with its check file (cpp_compiler.h); the key covers the source, the
// target architecture and NVRTC's version. A warm process loads the cubin without NVRTC.
#pragma once
#include <string>

namespace kiln::runtime {

struct CubinResult {
  std::string cubin;   // empty on failure
  std::string error;   // readable reason on failure (NVRTC's log included)
  bool cache_hit = false;
  double seconds = 0;
};

// `arch`: compute capability as major * 10 + minor (90 for sm_90).
CubinResult compile_cuda_cached(const std::string& dir, const std::string& source, int arch);

}  // namespace kiln::runtime
