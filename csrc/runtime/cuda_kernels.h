// A graph's CUDA kernels, loaded from one or more cubins, and their launches on PyTorch's current
// stream (DESIGN §3, Runtime). Built only with KILN_WITH_CUDA; the header needs no CUDA headers, so
// CompiledGraph can hold one in any build.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"

namespace kiln::runtime {

class CudaKernels {
 public:
  // Loads the cubins on CUDA device `device` and finds each kernel (its scalar twin and its
  // autotuning alternatives) in cubin `unit_of[k]`. Returns null with `error` set on failure.
  // Where `same[k]` names an earlier kernel (codegen::same_kernels: the same code), kernel k runs
  // that kernel's functions (their names; kernel k's source was not compiled).
  static std::shared_ptr<CudaKernels> load(const std::vector<std::string>& cubins, const std::vector<int>& unit_of,
                                           std::vector<codegen::CudaKernel> kernels, int device, std::string* error,
                                           const std::vector<int>& same = {});
  // Launches kernel `k` (the configuration chosen for it) on the device's current stream: its
  // parameters are taken from the graph's buffer table `ptrs`, then the error flag `err` (device
  // memory, or null when no kernel checks anything). The scalar twin runs when a vectorized
  // buffer is not 16-byte aligned. Throws std::runtime_error when the launch fails.
  //
  // Kernels for runtime sizes (CudaKernel::symbols) also take the size symbols' values and, for
  // a program at other sizes than the one they were generated from, its launch per kernel
  // (codegen::cuda_sized_launches; null: the kernel's own).
  struct Sizes {
    const int64_t* symbols = nullptr;
    const codegen::CudaSizedLaunch* launches = nullptr;  // per kernel
  };
  void launch(int k, void* const* ptrs, int* err, const Sizes* sizes = nullptr) const;
  // Autotuning: times every configuration of kernel `k` on these buffers (CUDA events, on the
  // current stream), keeps the fastest and returns its index (0: the default). The kernel's
  // outputs hold its result afterwards, as after launch(). Each configuration is timed in
  // kTuneRounds rounds, interleaved with the others, of kTuneReps launches queued behind a wait
  // on the GPU (kiln_spin, so the host's launch rate is not what is timed); the median round
  // counts, and another configuration replaces the default only when at least kTuneMargin faster
  // (a small kernel's rounds vary by a few percent).
  int tune(int k, void* const* ptrs, int* err);
  int configurations(int k) const { return static_cast<int>(variants_[k].size()); }
  std::string configuration(int k, int c) const { return variants_[k][c].config; }
  int choice(int k) const { return choice_[k]; }
  void set_choice(int k, int c) { choice_[k] = c; }
  size_t size() const { return variants_.size(); }
  // Whether some kernel may set the error flag.
  bool checks() const { return checks_; }
  int device() const { return device_; }
  const std::string& name(int k) const { return variants_[k][0].kernel.name; }
  // The kernels in their default configuration (what cuda_sized_launches compares against).
  std::vector<codegen::CudaKernel> defaults() const;
  // Where the tuned choices are kept (empty: not autotuned), and whether they are still to be found.
  std::string tune_path;
  bool needs_tuning = false;

 private:
  struct Variant {
    codegen::CudaKernel kernel;  // alternatives cleared
    void* function = nullptr;    // CUfunction
    void* scalar = nullptr;
    std::string config;
  };
  int launch_variant(const Variant& v, void* const* ptrs, int* err, void* stream, const int64_t* symbols = nullptr,
                     const codegen::CudaSizedLaunch* sized = nullptr) const;
  std::vector<std::vector<Variant>> variants_;  // per kernel: the default, then the alternatives
  std::vector<int> choice_;
  std::vector<void*> modules_;  // CUmodule, never unloaded (kernels may outlive the graph)
  std::vector<void*> spin_;     // per kernel: its module's kiln_spin (null where missing)
  int device_ = 0;
  bool checks_ = false;
};

// Compute capability of CUDA device `device` as major * 10 + minor, or 0 if unknown.
int cuda_arch(int device);

}  // namespace kiln::runtime
