// CompiledGraph: runs a lowered program with no Python per kernel (DESIGN §3, Runtime).
//
// Holds the program, the traced graph's extern-call templates and constants, and the loaded
// kernels. A call allocates kernel outputs through ATen, calls kernels with the buffer pointer
// table, calls extern operators through the dispatcher (boxed), releases buffers after their
// last reader, copies back mutated inputs, and returns the outputs. It checks nothing that the
// guards already checked.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ir/loop_ir.h"
#include "runtime/cuda_kernels.h"
#include "torch_bridge/tracer.h"

namespace kiln::runtime {

// A kernel found an out-of-range index or an integer division by zero. The caller re-runs the
// graph eagerly so the user sees exactly eager's exception (inputs are not mutated yet).
struct KernelCheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// An input's dtype, sizes or strides differ from the traced ones the kernels were generated for
// (callers normally guard this; the graph refuses rather than read out of bounds).
struct InputMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// True when an input written in place (`written`: input positions, `index_of` gives one) shares
// memory with another input: the graph, which reads its inputs as independent values, would miss
// the write through the other one.
template <class Written, class IndexOf>
bool written_input_aliases(const Written& written, IndexOf index_of, const std::vector<at::Tensor>& inputs) {
  for (const auto& m : written) {
    const int i = index_of(m);
    const at::Tensor& w = inputs.at(i);
    for (size_t j = 0; j < inputs.size(); ++j)
      if (static_cast<int>(j) != i && inputs[j].defined() && inputs[j].storage().is_alias_of(w.storage())) return true;
  }
  return false;
}
// The same for a graph's input mutations (pairs of input position and new contents).
template <class Mutations>
bool mutated_input_aliases(const Mutations& mutations, const std::vector<at::Tensor>& inputs) {
  return written_input_aliases(mutations, [](const auto& m) { return m.first; }, inputs);
}

class CompiledGraph {
 public:
  CompiledGraph(bridge::TraceResult trace, ir::Program program);
  ~CompiledGraph();
  // Loads kernels from the library; returns false with `error` set on failure.
  bool load(const std::string& library, std::string* error);
  // Runs on CUDA device `device` with these kernels instead (codegen/cuda): kernel outputs are
  // allocated there, kernels launch on its current stream.
  void use_cuda(std::shared_ptr<CudaKernels> kernels, int device);
  // A CUDA graph with no kernels of kiln's (extern calls alone: matmuls with their epilogues) runs
  // on CUDA device `device` all the same: its inputs are checked there.
  void use_device(int device);
  bool on_cuda() const { return cuda_ != nullptr; }
  // Runs `base`'s kernels, generated for runtime sizes (ir/size_template.h), with these values of
  // their size symbols: this graph's program is the template's at those values (checked by the
  // caller), so only its buffers, extern calls and the symbols differ from `base`.
  //
  // CUDA kernels also depend on decisions made from the sizes (vector accesses, launch sizes):
  // `sizes` (this program's spelling of the template) generates them again for this program, and
  // share_kernels returns false with `why` set where they are not the kernels `base` runs
  // (codegen::cuda_sized_launches); the caller then builds this program on its own.
  bool share_kernels(const CompiledGraph& base, std::vector<int64_t> symbols, const codegen::CudaSizes* sizes = nullptr,
                     std::string* why = nullptr);
  void set_size_symbols(std::vector<int64_t> symbols) { symbols_ = std::move(symbols); }
  const std::vector<int64_t>& size_symbols() const { return symbols_; }
  // With `device_flag` (CUDA graphs being captured: no host sync allowed), the kernels' error
  // flag is handed back in device memory instead of being read; the caller reads it after replay.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, at::Tensor* device_flag = nullptr);
  // mode="max-autotune" on CUDA: one run on copies of these inputs (no memory reuse, so a kernel
  // can run again on the same buffers) that times each kernel's configurations and keeps the
  // fastest (CudaKernels::tune); the choices are written to the kernels' tune file so a warm
  // process loads them instead of timing again. Returns "kernel: configuration" per kernel, or
  // why nothing was tuned.
  std::string autotune(const std::vector<at::Tensor>& inputs);
  // The first operator of the graph that draws random numbers (rand, dropout, ...), or "": a run
  // of such a graph advances the generator, so it must not run more often than eager would.
  std::string random_operator() const;
  // Whether a run may be repeated with no effect beyond its discarded outputs: no input written in
  // place, no random numbers drawn, only ATen operators (a collective or a custom operator may
  // act beyond its results).
  bool rerunnable() const;
  const ir::Program& program() const { return program_; }
  const bridge::TraceResult& trace() const { return trace_; }
  size_t num_kernels() const { return program_.kernels.size(); }  // generated kernels (CPU or CUDA)
  size_t num_externs() const;

 private:
  std::vector<at::Tensor> run_steps(const std::vector<at::Tensor>& inputs, at::Tensor* device_flag, bool tuning);
  bridge::TraceResult trace_;
  ir::Program program_;
  void* handle_ = nullptr;
  std::vector<void (*)(void**)> kernels_;
  std::vector<std::string> kernel_names_;  // as torch.profiler shows them (name_kernels)
  std::shared_ptr<CudaKernels> cuda_;                     // set: the kernels run on this CUDA device
  c10::Device device_ = c10::Device(c10::kCPU);
  std::vector<std::optional<c10::OperatorHandle>> ops_;  // per ATen node (externs only)
  std::vector<std::vector<int>> kernel_outputs_;          // per kernel: buffers it allocates
  std::vector<int> donee_;                                // per buffer: who takes its memory, or -1
  std::vector<bool> input_on_cpu_;                        // per graph input: traced on the CPU
  std::vector<int64_t> symbols_;                          // size symbols the kernels read (runtime sizes)
  std::vector<codegen::CudaSizedLaunch> sized_launches_;  // CUDA kernels shared at other sizes: per kernel, how it runs here
  // Extern view operators (view, t, transpose, expand...) whose result stays inside the graph are
  // made directly as an alias of their input's storage with the traced sizes and strides (no
  // dispatcher call: a NanoGPT layer has about ten of them around its matmuls).
  void plan_fast_views();
  void name_kernels();
  struct FastView {
    int in = -1, out = -1;  // buffers
    std::vector<int64_t> sizes, strides;
    int64_t offset_delta = 0;  // storage offset of the result minus that of the input
  };
  std::vector<std::optional<FastView>> fast_views_;       // per step
};

}  // namespace kiln::runtime
