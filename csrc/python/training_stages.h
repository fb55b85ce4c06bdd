// Training graphs in the bindings: a graph called with autograd is traced as one joint
// forward+backward graph (torch_bridge/tracer.h), split by a partitioner (autograd/partition.h)
// and built as two compiled graphs, which kiln/_autograd.py runs as one autograd node.
// CodegenGraph (codegen_bindings.cpp) keeps one TrainingStages per size signature; this file owns
// what a pair holds, how it is built, and its Python bindings.
#pragma once
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
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

// A training graph compiled as a forward and a backward graph (csrc/autograd/partition.h), which
// kiln/_autograd.py runs as one autograd node: forward returns the outputs then the saved
// values; backward takes the saved primals, the saved values and one tangent per output that
// requires grad, and returns the gradients of the primals listed in grad_of.
struct TrainingStages {
  std::shared_ptr<runtime::CompiledGraph> fwd, bwd;
  int num_inputs = 0, num_outputs = 0;
  std::vector<int> saved_primals, grad_of;
  std::vector<int> mutated_inputs;  // forward outputs after num_outputs: new contents of these inputs
  std::vector<bool> output_requires_grad;
  std::vector<std::vector<int>> grad_tangents;  // per gradient: the outputs (tangents) whose autograd graph reaches it
  std::vector<int> unreached_inputs;             // inputs with no gradient (no edge from the node to them)
  // The differentiable outputs grouped by the inputs they reach (outputs that share an input are
  // in one group): per group, its forward outputs and its gradients (positions in grad_of). With
  // several groups, kiln/_autograd.py gives each its own autograd node, so that backward from one
  // group's outputs visits only the inputs those reach, as eager's does.
  std::vector<std::vector<int>> component_outputs, component_grads;
  std::vector<int> tangent_of_output;  // per forward output: its tangent, -1 when it needs no gradient
  std::string describe;
  // For calls where some outputs get no gradient: the backward's trace, built again without the
  // absent tangents' formulas (autograd/absent_tangents.h), once per set of given tangents.
  bridge::TraceResult bwd_trace;
  int first_tangent = 0;  // backward inputs before the tangents (saved primals and values)
  runtime::BuildOptions opts;
  struct Pruned {
    std::shared_ptr<runtime::CompiledGraph> graph;
    std::vector<bool> zero_output;
    std::vector<int> reads;  // the saved tensors (backward inputs before the tangents) it reads
  };
  std::map<std::vector<bool>, Pruned> pruned;

  py::list run(runtime::CompiledGraph& g, py::list in);
  // The backward for these given tangents, built on first use.
  const Pruned& pruned_for(const std::vector<bool>& given);
  // The backward for a call where only the tangents marked in `given` came (the others' inputs
  // are placeholders it does not read): the gradients, None where structurally zero.
  py::list backward_given(const std::vector<bool>& given, py::list in);
};

// A training graph traced at one call's sizes, partitioned and lowered, before any code is
// generated: what build_training_stages builds, and what runtime sizes (training_sizes.h) fit a
// template from.
struct TrainingPlan {
  std::shared_ptr<TrainingStages> stages;  // all but fwd and bwd
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
// Both halves of a plan built (code generated and compiled, or loaded from the cache): `source`
// gets their code. Throws std::runtime_error when a build fails.
std::shared_ptr<TrainingStages> build_training_stages(TrainingPlan plan, const runtime::BuildOptions& opts, std::string* source);

// TrainingStages for kiln/_autograd.py, and _saved_aliases.
void bind_training(py::module_& m);

}  // namespace kiln::python
