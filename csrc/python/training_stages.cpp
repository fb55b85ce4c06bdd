// Training graphs in the bindings: building a TrainingStages pair and running its halves; see
// training_stages.h.
#include "python/training_stages.h"

#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/ops/empty.h>

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "autograd/absent_tangents.h"
#include "autograd/partition.h"

namespace kiln::python {

py::list TrainingStages::run(runtime::CompiledGraph& g, py::list in) {
  std::vector<at::Tensor> ts = unpack_tensors(in, "inputs");
  std::vector<at::Tensor> outs;
  {
    py::gil_scoped_release nogil;
    outs = g.run(ts);
  }
  py::list r;
  for (auto& t : outs) r.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(t)));
  return r;
}

// The boxed arguments of an inserted aten::zeros (autograd/absent_tangents.cpp): size, dtype,
// layout, device (the graph's), pin_memory.
static std::vector<c10::IValue> zeros_args(const ir::AtenGraph& g, const ir::AtenNode& n, int cuda_device) {
  bool cpu = g.values.at(n.outputs.at(0)).meta.cpu;
  c10::Device device = cpu ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(std::max(cuda_device, 0)));
  return {c10::IValue(n.args.at(0).ints), c10::IValue(n.args.at(1).i), c10::IValue(), c10::IValue(device), c10::IValue()};
}

const TrainingStages::Pruned& TrainingStages::pruned_for(const std::vector<bool>& given) {
  auto it = pruned.find(given);
  if (it != pruned.end()) return it->second;
  autograd::PrunedBackward p = autograd::prune_absent_tangents(bwd_trace.graph, first_tangent, given);
  bridge::TraceResult t;
  t.graph = std::move(p.graph);
  t.constants = bwd_trace.constants;
  for (int n : p.origin) t.node_args.push_back(n >= 0 ? bwd_trace.node_args.at(n) : zeros_args(t.graph, t.graph.nodes[t.node_args.size()], opts.cuda_device));
  runtime::BuildResult b;
  {
    py::gil_scoped_release nogil;
    b = runtime::build_graph(std::move(t), opts);
  }
  if (!b.graph) throw std::runtime_error("kiln: building the backward for the outputs that got a gradient failed: " + b.error);
  std::vector<int> reads;
  std::vector<int> uses = b.graph->trace().graph.use_counts();
  for (size_t v = 0; v < b.graph->trace().graph.values.size(); ++v) {
    const ir::AtenValue& val = b.graph->trace().graph.values[v];
    if (val.kind == ir::AtenValue::kInput && val.index < first_tangent && uses[v] > 0) reads.push_back(val.index);
  }
  return pruned.emplace(given, Pruned{b.graph, std::move(p.zero_output), std::move(reads)}).first->second;
}

py::list TrainingStages::backward_given(const std::vector<bool>& given, py::list in) {
  const Pruned& p = pruned_for(given);
  py::list got = run(*p.graph, in);
  py::list r;
  size_t k = 0;
  for (bool z : p.zero_output) r.append(z ? py::none() : py::object(got[k++]));
  return r;
}

// A tensor over `t`'s memory with its sizes and strides and no autograd history, made without a
// dispatcher call (several per training call): with a version counter of its own, or sharing t's.
// Tensors of a Python subclass or not strided take the dispatcher's route.
static at::Tensor shallow_alias(const at::Tensor& t, bool share_version) {
  if (t.layout() != c10::kStrided || t.key_set().has(c10::DispatchKey::Python) || !t.has_storage()) {
    at::Tensor a = share_version ? t.detach() : at::empty({0}, t.options().requires_grad(false));
    if (!share_version) a.set_(t.storage(), t.storage_offset(), t.sizes(), t.strides());
    return a;
  }
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(t.storage()), t.key_set() - c10::autograd_dispatch_keyset, t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (share_version) impl->set_version_counter(t.unsafeGetTensorImpl()->version_counter());
  return at::Tensor(std::move(impl));
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
  for (int i = 0; i < jt.num_primals; ++i)
    if (std::find(jt.grad_of.begin(), jt.grad_of.end(), i) == jt.grad_of.end()) st->unreached_inputs.push_back(i);
  group_outputs(*st);
  st->describe = split.describe();
  st->bwd_trace = plan.bwd_trace;  // before lowering prepares plan's copy for its device
  st->first_tangent = static_cast<int>(split.saved_primals.size()) + split.num_saved_values;
  st->opts = opts;
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

std::shared_ptr<TrainingStages> build_training_stages(TrainingPlan plan, const runtime::BuildOptions& opts, std::string* source) {
  runtime::BuildResult f, b;
  {
    py::gil_scoped_release nogil;
    f = runtime::build_lowered(std::move(plan.fwd_trace), std::move(plan.fwd_prog), opts);
    if (f.graph) b = runtime::build_lowered(std::move(plan.bwd_trace), std::move(plan.bwd_prog), opts);
  }
  if (!f.graph) throw std::runtime_error("forward: " + f.error);
  if (!b.graph) throw std::runtime_error("backward: " + b.error);
  plan.stages->fwd = f.graph;
  plan.stages->bwd = b.graph;
  *source = "// ==== forward ====\n" + f.source + "// ==== backward ====\n" + b.source;
  return plan.stages;
}

void bind_training(py::module_& m) {
  py::class_<TrainingStages, std::shared_ptr<TrainingStages>>(m, "TrainingStages")
      .def("forward", [](TrainingStages& s, py::list in) { return s.run(*s.fwd, in); })
      .def("backward", [](TrainingStages& s, py::list in) { return s.run(*s.bwd, in); })
      .def("saved_read", [](TrainingStages& s, const std::vector<bool>& given) { return s.pruned_for(given).reads; },
           "the saved tensors the backward for these given tangents reads (building it on first use)")
      .def("backward_given", &TrainingStages::backward_given, py::arg("given"), py::arg("inputs"),
           "the backward for a call where only the tangents marked given came: gradients, None where structurally zero")
      .def_readonly("num_inputs", &TrainingStages::num_inputs)
      .def_readonly("num_outputs", &TrainingStages::num_outputs)
      .def_readonly("saved_primals", &TrainingStages::saved_primals)
      .def_readonly("grad_of", &TrainingStages::grad_of)
      .def_readonly("mutated_inputs", &TrainingStages::mutated_inputs)
      .def_readonly("output_requires_grad", &TrainingStages::output_requires_grad)
      .def_readonly("grad_tangents", &TrainingStages::grad_tangents)
      .def_readonly("unreached_inputs", &TrainingStages::unreached_inputs)
      .def_readonly("component_outputs", &TrainingStages::component_outputs)
      .def_readonly("component_grads", &TrainingStages::component_grads)
      .def_readonly("tangent_of_output", &TrainingStages::tangent_of_output)
      .def_readonly("describe", &TrainingStages::describe);
  // For kiln/_autograd.py: per tensor a training node saves, an alias of its memory with a version
  // counter of its own (what the node saves: autograd's own check would fire when the caller
  // writes the tensor in place even where the backward of this call does not read it), a
  // detached alias sharing its version counter (to check the ones that are read), and that version.
  m.def("_saved_aliases", [](py::list in) {
    py::list aliases, witnesses, versions;
    for (py::handle h : in) {
      if (!THPVariable_Check(h.ptr())) throw py::type_error("saved tensors must be tensors");
      const at::Tensor& t = THPVariable_Unpack(h.ptr());
      aliases.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(shallow_alias(t, false))));
      witnesses.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(shallow_alias(t, true))));
      versions.append(t._version());
    }
    return py::make_tuple(aliases, witnesses, versions);
  });
}

}  // namespace kiln::python
