// Training graphs in the bindings: a graph called with autograd is traced as one joint
// forward+backward graph (torch_bridge/tracer.h), split by a partitioner (autograd/partition.h)
// and built as two compiled graphs, which training_node.cpp runs as autograd nodes.
// CodegenGraph (codegen_bindings.cpp) keeps one TrainingStages per size signature; this file owns
// what a pair holds, how it is built, and its Python bindings.
#pragma once
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/compiled_graph.h"
#include "runtime/graph_build.h"
#include "torch_bridge/tracer.h"

namespace kiln::python {

namespace py = pybind11;

// Shared with codegen_bindings.cpp (defined there).
std::vector<at::Tensor> unpack_tensors(py::handle seq, const char* what);
py::tuple wrap_tensors(const std::vector<at::Tensor>& ts);
// Whether one of `outputs` is a view (through view ops) of one of `targets`.
bool views_one_of(const ir::AtenGraph& g, const std::vector<int>& outputs, const std::set<int>& targets);
// The CUDA device of a call's tensors, noted in the build options (false, with `why`, when they
// span several CUDA devices).
bool note_cuda_device(const std::vector<at::Tensor>& inputs, runtime::BuildOptions& opts, std::string* why);

// A training graph compiled as a forward and a backward graph (csrc/autograd/partition.h), run by
// run_training_call (training_node.cpp) as one autograd node: forward returns the outputs then the
// saved values; backward takes the saved primals, the saved values and one tangent per output that
// requires grad, and returns the gradients of the primals listed in grad_of. The backward is built
// on its first use (the first backward call), not with the forward.
struct TrainingStages {
  std::shared_ptr<runtime::CompiledGraph> fwd;
  int num_inputs = 0, num_outputs = 0;
  std::vector<int> saved_primals, grad_of;
  std::vector<int> mutated_inputs;  // forward outputs after num_outputs: new contents of these inputs
  std::vector<bool> output_requires_grad;
  std::vector<std::vector<int>> grad_tangents;  // per gradient: the outputs (tangents) whose autograd graph reaches it
  // The differentiable outputs grouped by the inputs they reach (outputs that share an input are
  // in one group): per group, its forward outputs and its gradients (positions in grad_of). Each
  // group is an autograd node of its own, so that backward from one group's outputs visits only
  // the inputs those reach, as eager's does.
  std::vector<std::vector<int>> component_outputs, component_grads;
  std::vector<int> tangent_of_output;  // per forward output: its tangent, -1 when it needs no gradient
  int num_tangents = 0;
  std::string describe;
  std::string fwd_source;
  // The backward's trace: built into `bwd` on first use, and for calls where some outputs get no
  // gradient built again without the absent tangents' formulas (autograd/absent_tangents.h), once
  // per set of given tangents.
  bridge::TraceResult bwd_trace;
  int first_tangent = 0;  // backward inputs before the tangents (saved primals and values)
  runtime::BuildOptions opts;
  struct Pruned {
    std::shared_ptr<runtime::CompiledGraph> graph;
    std::vector<bool> zero_output;
    std::vector<int> reads;  // the saved tensors (backward inputs before the tangents) it reads
  };

  // The backward, built on the first call (with generated code, or op by op where that build
  // fails). Callers do not hold the GIL: the build runs without Python.
  runtime::CompiledGraph& backward();
  // The backward for these given tangents, built on first use (no GIL, as backward()).
  const Pruned& pruned_for(const std::vector<bool>& given);
  // The backward if it was built (texts and stats; never builds it).
  std::shared_ptr<runtime::CompiledGraph> backward_if_built() const;
  // The backward's lowered program (built or not): what runtime sizes compare and fit.
  const ir::Program& backward_program() const;
  // The backward to build on its first call: its trace as lowering prepared it, and its program.
  void defer_backward(bridge::TraceResult lowered, ir::Program prog);
  // A backward built already (runtime sizes' shared or cached kernels), with its code.
  void set_backward(std::shared_ptr<runtime::CompiledGraph> graph, std::string source);
  // "// ==== forward ====" and "// ==== backward ====" sections of the generated code.
  std::string source() const;
  // Seconds the backward's build took (negative until built), and whether it came from the
  // kernel cache on disk.
  double backward_build_s() const;
  bool backward_cache_hit() const;

 private:
  mutable std::mutex mutex_;  // the lazily built graphs below (backward threads, text getters)
  bridge::TraceResult bwd_lowered_;  // what defer_backward kept, until built
  ir::Program bwd_prog_;
  bool bwd_deferred_ = false;
  std::shared_ptr<runtime::CompiledGraph> bwd_;
  std::string bwd_source_;
  double bwd_build_s_ = -1;
  bool bwd_cache_hit_ = false;
  std::map<std::vector<bool>, Pruned> pruned_;
};

// One training call: runs the forward (with autograd off), writes back the inputs it mutates, and
// gives the differentiable outputs one autograd node per output group (TrainingNode,
// training_node.cpp) holding what the backward reads. Called with the GIL held; releases it while
// the forward runs.
std::vector<at::Tensor> run_training_call(const std::shared_ptr<TrainingStages>& stages, std::vector<at::Tensor> inputs);

// A training graph traced at one call's sizes, partitioned and lowered, before any code is
// generated: what build_training_stages builds, and what runtime sizes (training_sizes.h) fit a
// template from.
struct TrainingPlan {
  std::shared_ptr<TrainingStages> stages;  // all but the compiled halves
  bridge::TraceResult fwd_trace, bwd_trace;
  ir::Program fwd_prog, bwd_prog;
};
// The stages' inputs, outputs, saved values and gradients as text: plans of two sizes whose
// layouts and programs' shapes are equal can share one pair of kernels (training_sizes.h).
std::string stages_layout(const TrainingStages& s);
// Traces the joint graph of a call on `inputs` (run by `run`), partitions it (min-cut or save-all)
// and lowers both halves with `opts` (the CUDA device noted in it). Throws std::runtime_error or
// py::error_already_set with the reason when a step fails.
TrainingPlan plan_training(const std::vector<at::Tensor>& inputs, const bridge::GraphRunner& run, runtime::BuildOptions& opts, bool min_cut);
// A plan's forward built (code generated and compiled, or loaded from the cache), and its backward
// too unless `lazy_backward` (then on its first call). Throws std::runtime_error when a build fails.
std::shared_ptr<TrainingStages> build_training_stages(TrainingPlan plan, const runtime::BuildOptions& opts, bool lazy_backward);

// Traces the joint graph of a call on `inputs` (run by `run`), partitions it (min-cut or save-all)
// and builds the forward with `opts` (the CUDA device noted in it), and the backward too unless
// `lazy_backward` (then on its first call). Throws std::runtime_error or py::error_already_set with
// the reason when a step fails.
std::shared_ptr<TrainingStages> build_training_stages(const std::vector<at::Tensor>& inputs, const bridge::GraphRunner& run,
                                                      runtime::BuildOptions& opts, bool min_cut, bool lazy_backward);

// TrainingStages in Python (its halves run alone, for scripts that time them).
void bind_training(py::module_& m);

}  // namespace kiln::python
