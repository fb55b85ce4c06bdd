// Building a traced graph into a CompiledGraph: lower, plan memory, generate C++ (or CUDA, for a
// graph on a CUDA device), compile (or load from the cache) and load. Pure C++ (no Python), so it can run on a background thread
// while the caller keeps running the graph eagerly (DESIGN §3; compile latency).
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ir/size_template.h"
#include "runtime/compiled_graph.h"
#include "torch_bridge/tracer.h"

namespace kiln::runtime {

struct BuildOptions {
  std::string cache_dir;   // empty: the default (cpp_compiler.h)
  bool fuse = true;
  bool extern_only = false;  // no generated code: every node runs as an ATen call
  int jobs = 0;            // compiler processes at once (0: one per CPU)
  // A graph whose tensors are on a CUDA device is built for it (codegen/cuda, NVRTC): this device
  // (-1: the device of the traced results) and its compute capability (0: asked of the driver).
  int cuda_device = -1;
  int cuda_arch = 0;
  // mode="max-autotune": CUDA kernels are generated with alternative configurations, timed on the
  // first call's inputs (CompiledGraph::autotune) or chosen from an earlier process's tune file.
  bool autotune = false;
  // The graph is lowered for one of many sizes (runtime sizes: a new signature's sample or
  // served size), not its first: kernels that cost a setup per shape are avoided (attention_fusion.h).
  bool sizes_vary = false;
};

struct BuildResult {
  std::shared_ptr<CompiledGraph> graph;  // null on failure
  std::string error;                     // why it failed
  std::string source;                    // generated code of all units, prefix header left out
  std::vector<std::pair<std::string, double>> timings;  // seconds per stage
  std::vector<std::pair<std::string, int64_t>> counts;  // CUDA units and kernels compiled
  bool cache_hit = false;
};

BuildResult build_graph(bridge::TraceResult trace, const BuildOptions& opts);

// Process-wide settings of CUDA builds, pushed from kiln's options registry: the kernel source per
// NVRTC unit (units compile concurrently) and whether units compile in child processes.
void set_cuda_compile_settings(size_t unit_bytes, bool in_processes);

// The program build_graph generates code for: a traced graph lowered, its memory planned. A CUDA
// graph's trace is first prepared for its device (scalar constants moved there, matmul
// epilogues fused), so `trace` must be the one the program is built with.
ir::Program lower_graph(bridge::TraceResult& trace, const BuildOptions& opts);
// build_graph's code generation and compilation for a program (CPU or CUDA) lowered from `trace` that is
// one sample of `tmpl` (ir/size_template.h), at size symbols `symbols`: its kernels are generated
// for runtime sizes, so other graphs at other sizes can share them (CompiledGraph::share_kernels).
BuildResult build_for_sizes(bridge::TraceResult trace, ir::Program prog, const ir::SizeTemplate& tmpl, std::vector<int64_t> symbols,
                            const BuildOptions& opts);
// A program of `tmpl` lowered at `symbols` (from `trace`), run by `base`'s kernels (built by
// build_for_sizes from the same template): on CUDA only where those kernels serve its sizes
// (CompiledGraph::share_kernels); null, with `why` set, where they do not.
std::shared_ptr<CompiledGraph> share_sized_kernels(bridge::TraceResult trace, ir::Program prog, const CompiledGraph& base,
                                                   const ir::SizeTemplate& tmpl, std::vector<int64_t> symbols, std::string* why);
// build_graph for a program already lowered from `trace` (lower_graph).
BuildResult build_lowered(bridge::TraceResult trace, ir::Program prog, const BuildOptions& opts);

// Size templates in the kernel cache, keyed by the program's shape, with the caller's note (where
// its symbols are read from): a process that meets a program of this shape at a size it never saw
// checks it against the template and loads the cached kernels instead of building any.
void store_size_template(const BuildOptions& opts, const ir::SizeTemplate& t, const std::string& note);
std::optional<std::pair<ir::SizeTemplate, std::string>> load_size_template(const BuildOptions& opts, const std::string& shape);

// build_graph on its own thread. The destructor waits for it.
class BackgroundBuild {
 public:
  BackgroundBuild(bridge::TraceResult trace, BuildOptions opts);
  ~BackgroundBuild();
  bool done() const { return done_.load(std::memory_order_acquire); }
  BuildResult take();  // waits until done
 private:
  std::atomic<bool> done_{false};
  BuildResult result_;
  std::thread thread_;
};

}  // namespace kiln::runtime
