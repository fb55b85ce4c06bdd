// The torch_bridge tracer: runs a captured graph once at the ATen dispatcher level and records
// the functional ATen operators it executes (DESIGN §3, torch_bridge).
//
// How: a boxed fallback on the dispatcher's `Fake` functionality key (which PyTorch places below
// Autograd and Functionalize and registers nothing on) sees every operator after PyTorch itself
// applied CompositeImplicitAutograd decompositions (at the Autograd key) and functionalization
// (views re-applied, mutations turned into out-of-place ops). The key is switched on through
// thread-local "included" keys only while a trace runs, so ordinary tensors never carry it.
//
// The graph runs on the real inputs of its first call: each operator's result is real, so the
// traced run *is* that call's result, output metadata comes for free, and no Python meta kernel
// runs. Operators whose output shape or values depend on tensor data (nonzero, item, ...) make
// the trace fail, and the caller falls back to running the graph eagerly.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <vector>

#include "ir/aten_graph.h"

namespace kiln::bridge {

struct TraceResult {
  ir::AtenGraph graph;
  std::vector<at::Tensor> constants;                // graph.values of kind kConstant index this
  std::vector<std::vector<c10::IValue>> node_args;  // per node: its boxed arguments, tensors dropped (None)
  std::vector<at::Tensor> outputs;                  // the real results of the traced run
  std::vector<at::Tensor> mutation_results;         // per graph.input_mutations entry: the new contents
};

// True when this PyTorch build lets kiln trace (the fallback registered); otherwise `why` says why.
bool tracer_available(std::string* why);

using GraphRunner = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
// Runs `run` on functional views of `inputs` with tracing on. Throws std::runtime_error with a
// readable reason when the graph cannot be traced. Input mutations are recorded in
// graph.input_mutations and NOT applied to `inputs`: the caller applies them.
TraceResult trace(const std::vector<at::Tensor>& inputs, const GraphRunner& run);

// The joint forward+backward graph of a training call (AOTAutograd's job, at the dispatcher):
// the graph runs on detached copies of `inputs` (those that require grad become differentiable
// leaves) and PyTorch's autograd engine differentiates its outputs with tangent inputs, while
// the tracer records every functional operator of both passes. Graph inputs: the primals, then
// one tangent per output that requires grad; outputs: the forward outputs, then the gradients
// that are defined. The caller's tensors and autograd graph are untouched. The new contents of
// inputs the graph writes in place (BatchNorm's running statistics, `x.mul_(2)` on an input) are
// extra forward outputs, right after the graph's own, for the caller to copy back; where the
// input requires grad they are differentiable outputs with tangents like the graph's own.
struct JointTrace {
  TraceResult trace;
  int num_primals = 0;
  int num_fwd_outputs = 0;                 // the graph's outputs plus one per mutated input
  std::vector<int> mutated_inputs;         // per extra forward output: the input it overwrites
  std::vector<bool> output_requires_grad;  // per forward output, the mutated inputs' included
  std::vector<int> grad_of;                // per gradient output: the primal it belongs to
  std::vector<std::vector<int>> grad_outputs;  // per gradient output: the differentiable outputs
                                               // (0-based among them) whose autograd graph reaches it
};
// `unlocked` runs a block with the caller's interpreter lock released (PyTorch's autograd engine
// refuses to run while the GIL is held; the bridge knows nothing of Python).
using Unlocked = std::function<void(const std::function<void()>&)>;
JointTrace trace_joint(const std::vector<at::Tensor>& inputs, const GraphRunner& run, const Unlocked& unlocked);

ir::TensorMeta meta_of(const at::Tensor& t);

}  // namespace kiln::bridge
