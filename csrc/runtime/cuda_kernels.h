// A graph's CUDA kernels, loaded from a cubin, and their launches on PyTorch's current stream
// (DESIGN §3, Runtime). Built only with KILN_WITH_CUDA; the header needs no CUDA headers, so
// CompiledGraph can hold one in any build.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"

namespace kiln::runtime {

class CudaKernels {
 public:
  // Loads `cubin` on CUDA device `device` and finds each kernel (and its scalar twin). Returns
  // null with `error` set on failure.
  static std::shared_ptr<CudaKernels> load(const std::string& cubin, std::vector<codegen::CudaKernel> kernels, int device,
                                           std::string* error);
  // Launches kernel `k` on the device's current stream: its parameters are taken from the
  // graph's buffer table `ptrs`, then the error flag `err` (device memory, or null when no kernel
  // checks anything). The scalar twin runs when a vectorized buffer is not 16-byte aligned.
  // Throws std::runtime_error when the launch fails.
  void launch(int k, void* const* ptrs, int* err) const;
  // Whether some kernel may set the error flag.
  bool checks() const { return checks_; }
  int device() const { return device_; }

 private:
  std::vector<codegen::CudaKernel> kernels_;
  std::vector<void*> functions_, scalar_functions_;  // CUfunction
  void* module_ = nullptr;                             // CUmodule, never unloaded (kernels may outlive the graph)
  int device_ = 0;
  bool checks_ = false;
};

// Compute capability of CUDA device `device` as major * 10 + minor, or 0 if unknown.
int cuda_arch(int device);

}  // namespace kiln::runtime
