// Training graphs in the bindings: building a TrainingStages pair and running its halves; see
// training_stages.h.
#include "python/codegen_graph/training_stages.h"

#include <pybind11/stl.h>

#include <ATen/ops/empty.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>

#include "autograd/absent_tangents.h"
#include "autograd/partition.h"

namespace kiln::python {

// Seconds since t0.
static double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

runtime::CompiledGraph& TrainingStages::backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bwd_) return *bwd_;
  if (!bwd_deferred_) throw std::logic_error("kiln: a training pair without a backward");
  auto t0 = std::chrono::steady_clock::now();
  runtime::BuildResult b = runtime::build_lowered(bwd_lowered_, bwd_prog_, opts);  // copies: bwd_prog_ stays for runtime sizes
  if (!b.graph) {
    // The forward already ran compiled: its backward runs op by op rather than not at all.
    runtime::BuildOptions aten = opts;
    aten.extern_only = true;
    std::string why = b.error;
    b = runtime::build_graph(bwd_trace, aten);
    if (!b.graph) throw std::runtime_error("kiln: building the training graph's backward failed: " + why + "; op by op: " + b.error);
    b.source = "// generated code failed (" + why + "): ATen calls only\n";
  }
  bwd_source_ = std::move(b.source);
  bwd_cache_hit_ = b.cache_hit;
  bwd_build_s_ = seconds_since(t0);
  bwd_ = std::move(b.graph);
  bwd_lowered_ = bridge::TraceResult();
  return *bwd_;
}

const ir::Program& TrainingStages::backward_program() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bwd_deferred_ ? bwd_prog_ : bwd_->program();
}

void TrainingStages::defer_backward(bridge::TraceResult lowered, ir::Program prog) {
  std::lock_guard<std::mutex> lock(mutex_);
  bwd_lowered_ = std::move(lowered);
  bwd_prog_ = std::move(prog);
  bwd_deferred_ = true;
}

void TrainingStages::set_backward(std::shared_ptr<runtime::CompiledGraph> graph, std::string source) {
  std::lock_guard<std::mutex> lock(mutex_);
  bwd_ = std::move(graph);
  bwd_source_ = std::move(source);
  bwd_deferred_ = false;
  bwd_lowered_ = bridge::TraceResult();
  bwd_prog_ = ir::Program();
}

std::shared_ptr<runtime::CompiledGraph> TrainingStages::backward_if_built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bwd_;
}

std::string TrainingStages::source() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return "// ==== forward ====\n" + fwd_source + "// ==== backward ====\n" +
         (bwd_ ? bwd_source_ : std::string("// built on the first backward call\n"));
}

double TrainingStages::backward_build_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bwd_build_s_;
}

bool TrainingStages::backward_cache_hit() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bwd_cache_hit_;
}

// The boxed arguments of an inserted aten::zeros (autograd/absent_tangents.cpp): size, dtype,
// layout, device (the graph's), pin_memory.
static std::vector<c10::IValue> zeros_args(const ir::AtenGraph& g, const ir::AtenNode& n, int cuda_device) {
  bool cpu = g.values.at(n.outputs.at(0)).meta.cpu;
  c10::Device device = cpu ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(std::max(cuda_device, 0)));
  return {c10::IValue(n.args.at(0).ints), c10::IValue(n.args.at(1).i), c10::IValue(), c10::IValue(device), c10::IValue()};
}

const TrainingStages::Pruned& TrainingStages::pruned_for(const std::vector<bool>& given) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pruned_.find(given);
  if (it != pruned_.end()) return it->second;
  autograd::PrunedBackward p = autograd::prune_absent_tangents(bwd_trace.graph, first_tangent, given);
  bridge::TraceResult t;
  t.graph = std::move(p.graph);
  t.constants = bwd_trace.constants;
  for (int n : p.origin) t.node_args.push_back(n >= 0 ? bwd_trace.node_args.at(n) : zeros_args(t.graph, t.graph.nodes[t.node_args.size()], opts.cuda_device));
  runtime::BuildResult b = runtime::build_graph(std::move(t), opts);
  if (!b.graph) throw std::runtime_error("kiln: building the backward for the outputs that got a gradient failed: " + b.error);
  std::vector<int> reads;
  std::vector<int> uses = b.graph->trace().graph.use_counts();
  for (size_t v = 0; v < b.graph->trace().graph.values.size(); ++v) {
    const ir::AtenValue& val = b.graph->trace().graph.values[v];
    if (val.kind == ir::AtenValue::kInput && val.index < first_tangent && uses[v] > 0) reads.push_back(val.index);
  }
  return pruned_.emplace(given, Pruned{b.graph, std::move(p.zero_output), std::move(reads)}).first->second;
}

// TrainingStages::component_outputs / component_grads: union-find over the tangents, joined by
// each gradient the tangents reach.
static void group_outputs(TrainingStages& st) {
  std::vector<int> output_of;  // per tangent: its forward output
  for (size_t j = 0; j < st.output_requires_grad.size(); ++j) {
    st.tangent_of_output.push_back(st.output_requires_grad[j] ? static_cast<int>(output_of.size()) : -1);
    if (st.output_requires_grad[j]) output_of.push_back(static_cast<int>(j));
  }
  std::vector<int> parent(output_of.size());
  for (size_t t = 0; t < parent.size(); ++t) parent[t] = static_cast<int>(t);
  std::function<int(int)> root = [&](int t) { return parent[t] == t ? t : parent[t] = root(parent[t]); };
  for (const auto& tangents : st.grad_tangents)
    for (size_t k = 1; k < tangents.size(); ++k) parent[root(tangents[k])] = root(tangents[0]);
  std::map<int, int> group_of_root;
  std::vector<int> group(parent.size());
  for (size_t t = 0; t < parent.size(); ++t) {
    auto it = group_of_root.emplace(root(static_cast<int>(t)), static_cast<int>(group_of_root.size())).first;
    group[t] = it->second;
  }
  st.component_outputs.assign(group_of_root.size(), {});
  st.component_grads.assign(group_of_root.size(), {});
  for (size_t t = 0; t < group.size(); ++t) st.component_outputs[group[t]].push_back(output_of[t]);
  for (size_t p = 0; p < st.grad_tangents.size(); ++p)
    if (!st.grad_tangents[p].empty()) st.component_grads[group[st.grad_tangents[p][0]]].push_back(static_cast<int>(p));
}

static bridge::TraceResult split_trace(const ir::AtenGraph& g, const std::vector<int>& nodes, const std::vector<int>& constants,
                                       const bridge::TraceResult& joint) {
  bridge::TraceResult r;
  r.graph = g;
  for (int n : nodes) r.node_args.push_back(joint.node_args.at(n));
  for (int c : constants) r.constants.push_back(joint.constants.at(c));
  return r;
}

TrainingPlan plan_training(const std::vector<at::Tensor>& inputs, const bridge::GraphRunner& run, runtime::BuildOptions& opts, bool min_cut) {
  std::string why;
  if (!note_cuda_device(inputs, opts, &why)) throw std::runtime_error(why);
  bridge::JointTrace jt = bridge::trace_joint(inputs, run, [](const std::function<void()>& block) {
    py::gil_scoped_release nogil;
    block();
  });
  {  // the same refusal as for inference graphs (output_views_a_mutated_input): the new contents
     // of written inputs are the forward's last outputs here
    const int own = jt.num_fwd_outputs - static_cast<int>(jt.mutated_inputs.size());
    const auto& outs = jt.trace.graph.outputs;
    if (views_one_of(jt.trace.graph, std::vector<int>(outs.begin(), outs.begin() + own), std::set<int>(outs.begin() + own, outs.begin() + jt.num_fwd_outputs)))
      throw std::runtime_error("an output is a view of an input the graph writes in place (eager returns the input's view)");
  }
  autograd::JointSplit split = autograd::partition_joint(jt.trace.graph, jt.num_primals, jt.num_fwd_outputs,
                                                         min_cut ? autograd::Partitioner::kMinCut : autograd::Partitioner::kSaveAll);
  TrainingPlan plan;
  plan.fwd_trace = split_trace(split.forward, split.forward_nodes, split.forward_constants, jt.trace);
  plan.bwd_trace = split_trace(split.backward, split.backward_nodes, split.backward_constants, jt.trace);
  auto st = std::make_shared<TrainingStages>();
  st->num_inputs = jt.num_primals;
  st->num_outputs = jt.num_fwd_outputs - static_cast<int>(jt.mutated_inputs.size());
  st->mutated_inputs = jt.mutated_inputs;
  st->saved_primals = split.saved_primals;
  st->grad_of = jt.grad_of;
  st->output_requires_grad = jt.output_requires_grad;
  st->grad_tangents = jt.grad_outputs;
  group_outputs(*st);
  st->describe = split.describe();
  st->bwd_trace = plan.bwd_trace;  // before lowering prepares plan's copy for its device
  st->first_tangent = static_cast<int>(split.saved_primals.size()) + split.num_saved_values;
  st->opts = opts;
  st->num_tangents = static_cast<int>(std::count(st->output_requires_grad.begin(), st->output_requires_grad.end(), true));
  plan.stages = std::move(st);
  py::gil_scoped_release nogil;
  try {
    plan.fwd_prog = runtime::lower_graph(plan.fwd_trace, opts);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("forward: ") + e.what());
  }
  try {
    plan.bwd_prog = runtime::lower_graph(plan.bwd_trace, opts);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("backward: ") + e.what());
  }
  return plan;
}

std::string stages_layout(const TrainingStages& s) {
  auto ints = [](const std::vector<int>& v) {
    std::string r;
    for (int i : v) r += std::to_string(i) + ",";
    return r + ";";
  };
  std::string r = std::to_string(s.num_inputs) + " " + std::to_string(s.num_outputs) + " " + std::to_string(s.first_tangent) + " ";
  r += ints(s.mutated_inputs) + ints(s.saved_primals) + ints(s.grad_of);
  for (bool b : s.output_requires_grad) r += b ? '1' : '0';
  r += ";";
  for (const auto& g : s.grad_tangents) r += ints(g);
  return r;
}

std::shared_ptr<TrainingStages> build_training_stages(TrainingPlan plan, const runtime::BuildOptions& opts, bool lazy_backward) {
  runtime::BuildResult f;
  {
    py::gil_scoped_release nogil;
    f = runtime::build_lowered(std::move(plan.fwd_trace), std::move(plan.fwd_prog), opts);
  }
  if (!f.graph) throw std::runtime_error("forward: " + f.error);
  TrainingStages& st = *plan.stages;
  st.fwd = f.graph;
  st.fwd_source = std::move(f.source);
  st.defer_backward(std::move(plan.bwd_trace), std::move(plan.bwd_prog));
  if (!lazy_backward) {
    py::gil_scoped_release nogil;
    st.backward();
  }
  return plan.stages;
}

// Runs one of the halves on a list of tensors (GIL released), for scripts that time them alone.
static py::tuple run_half(runtime::CompiledGraph* g, TrainingStages& s, py::handle in) {
  std::vector<at::Tensor> ts = unpack_tensors(in, "inputs");
  std::vector<at::Tensor> outs;
  {
    py::gil_scoped_release nogil;
    outs = (g ? *g : s.backward()).run(ts);
  }
  return wrap_tensors(outs);
}

void bind_training(py::module_& m) {
  py::class_<TrainingStages, std::shared_ptr<TrainingStages>>(m, "TrainingStages")
      .def("forward", [](TrainingStages& s, py::handle in) { return run_half(s.fwd.get(), s, in); },
           "the compiled forward alone: the outputs, the new contents of mutated inputs, then the saved values")
      .def("backward", [](TrainingStages& s, py::handle in) { return run_half(nullptr, s, in); },
           "the compiled backward alone (built on first use) on the saved primals, saved values and tangents")
      .def_readonly("num_outputs", &TrainingStages::num_outputs)
      .def_readonly("describe", &TrainingStages::describe);
}

}  // namespace kiln::python
