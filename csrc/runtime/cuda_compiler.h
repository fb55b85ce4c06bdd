// Compiling generated CUDA source to a cubin with NVRTC, through an on-disk cache next to the CPU
// kernel cache (DESIGN §2: NVRTC at run time, no nvcc). Built only when PyTorch has CUDA
// (KILN_WITH_CUDA); NVRTC is reached through ATen's lazily loaded stub, so kiln links no CUDA
// library and a CPU-only machine never loads one.
//
// <cache>/<key>.cubin with its check file (cpp_compiler.h); the key covers the source, the
// target architecture and NVRTC's version. A warm process loads the cubin without NVRTC.
#pragma once
#include <string>
#include <vector>

namespace kiln::runtime {

struct CubinResult {
  std::string cubin;   // empty on failure
  std::string error;   // readable reason on failure (NVRTC's log included)
  bool cache_hit = false;
  double seconds = 0;
};

// `arch`: compute capability as major * 10 + minor (90 for sm_90).
CubinResult compile_cuda_cached(const std::string& dir, const std::string& source, int arch);

// compile_cuda_cached for several units at once, results in order. With `processes`, each unit
// that is not in the cache is compiled by NVRTC in a child process of its own (fork; the child
// compiles into the cache and exits, then this process reads the cubins from there; a unit whose
// child failed, or whose cubin could not be stored, is compiled here again, for its error or its
// cubin); otherwise on a thread each. A result's cache_hit says whether the unit was in the cache
// before the call.
std::vector<CubinResult> compile_cuda_units(const std::string& dir, const std::vector<std::string>& sources, int arch, bool processes);

}  // namespace kiln::runtime
