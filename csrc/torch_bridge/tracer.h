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

ir::TensorMeta meta_of(const at::Tensor& t);

}  // namespace kiln::bridge
