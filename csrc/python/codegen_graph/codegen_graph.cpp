// CodegenGraph's calls (see codegen_graph.h): the first call traces and builds, later calls run the
// compiled graph, and what cannot be compiled falls back to the eager graph; its texts and timings.
#include "python/codegen_graph/codegen_graph.h"

namespace kiln::python {

py::object CodegenGraph::call(py::args args) {
  // Another thread is tracing or building this graph (it released the GIL to build): this
  // call runs the graph op by op rather than race on the graph's state.
  if (building_) return eager_(*args);
  // With a debug dump on, a debugger that is tracing steps through the graph's Python form
  // (kiln/_debug.py, graph_module.py) rather than generated kernels it cannot see into.
  if (debug_ && debugger_attached()) return eager_(*args);
  if (state_ == kCompiling) {
    if (!pending_->done()) return eager_(*args);
    wait();
  }
  if (state_ == kEager) return eager_(*args);
  std::vector<at::Tensor> inputs;
  IntArgs ints;  // sizes handed in as ints (symbolic in the frontend): specialised per value here
  bool needs_grad = false;
  size_t pos = 0;
  for (py::handle h : args) {
    if (THPVariable_Check(h.ptr())) {
      inputs.push_back(THPVariable_Unpack(h.ptr()));
      needs_grad |= inputs.back().requires_grad();
    } else if (PyLong_CheckExact(h.ptr())) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
      if (overflow) { PyErr_Clear(); return fall_back("a graph input is an int beyond 64 bits", args); }
      ints.emplace_back(pos, v);
    } else {
      return fall_back("a graph input is not a tensor or an int", args);
    }
    ++pos;
  }
  // Entered under no_grad, a graph that turns grad mode on (the rest of a `with torch.no_grad()`
  // block and what follows it, after a graph break) records autograd from the middle: op by op.
  if (needs_grad && enables_grad_ && !c10::GradMode::is_enabled()) return eager_(*args);
  // Training: a compiled forward/backward pair behind one autograd node.
  std::optional<c10::NoGradGuard> no_autograd;
  if (needs_grad && c10::GradMode::is_enabled()) {
    // Saved-tensor hooks (activation checkpointing, offloading) must see what the graph's own
    // operators save, as in eager: a compiled pair saves another set (and checkpoint's
    // recomputation would find a different count). The graph runs op by op under them.
    if (!at::SavedTensorDefaultHooks::get_tls_state().stack.empty()) return eager_(*args);
    if (!grad_free_) return training_call(inputs, ints, args);
    // The joint trace found that no output requires grad (inputs that do are only read, or
    // written, under no_grad: a module built and used inside `torch.no_grad()`): the inference
    // program serves, all of it without autograd, as eager records none.
    no_autograd.emplace();
  }
  if (state_ != kNew && ints != int_args_) return other_sizes(size_signature(inputs, ints), inputs, ints, args);
  if (state_ == kReady && !sized_.empty()) {
    std::vector<int64_t> sig = size_signature(inputs, ints);
    if (sig != signature_) return other_sizes(std::move(sig), inputs, ints, args);
  }
  if (state_ == kReady) {
    std::vector<at::Tensor> outs;
    try {
      py::gil_scoped_release nogil;
      outs = graph_->run(inputs);
    } catch (const runtime::KernelCheckFailed& e) {
      return decline(e.what(), args);  // eager raises its own exception (IndexError, ...)
    } catch (const runtime::InputMismatch& e) {
      std::vector<int64_t> sig = size_signature(inputs, ints);
      if (sig != signature_) return other_sizes(std::move(sig), inputs, ints, args);
      return decline(e.what(), args);  // inputs aliased where one is written
    } catch (const std::exception& e) {
      // A CUDA graph that cannot run (a failed launch) runs eagerly from then on, with the
      // reason kept; its inputs are untouched (mutations are copied back last).
      if (!graph_->on_cuda()) throw;
      return fall_back(std::string("CUDA run failed: ") + e.what(), args);
    }
    return pack(outs);
  }
  if (state_ == kNew) {
    signature_ = size_signature(inputs, ints);
    int_args_ = ints;
    base_dims_ = call_dims(inputs, ints);
    base_ranks_.clear();
    for (const auto& t : inputs) base_ranks_.push_back(static_cast<int>(t.dim()));
  }
  return first_call(inputs, args);
}

// Waits for a background build, if one is running, and takes its result.
void CodegenGraph::wait() {
  if (state_ != kCompiling) return;
  runtime::BuildResult r;
  {
    py::gil_scoped_release nogil;
    r = pending_->take();
    pending_.reset();
  }
  finish(std::move(r));
}

std::string CodegenGraph::graph_text() const {
  if (training_) return training_text([](const runtime::CompiledGraph& g) { return g.trace().graph.to_string(); });
  return graph_ ? graph_->trace().graph.to_string() : trace_text_;
}

std::string CodegenGraph::program_text() const {
  if (training_) return training_text([](const runtime::CompiledGraph& g) { return g.program().to_string(); });
  return graph_ ? graph_->program().to_string() : "";
}

// The loop IR before fusion (the debug dump's loop_ir_unfused.txt): the traced graph lowered
// again with every value realized in its own kernel; program_text is the program that runs.
std::string CodegenGraph::unfused_program_text() const {
  auto unfused = [](const bridge::TraceResult& tr) -> std::string {
    try {
      lowering::LoweringOptions lo;
      lo.fuse = false;
      for (const ir::AtenValue& v : tr.graph.values) lo.cuda = lo.cuda || !v.meta.cpu;
      return lowering::Lowerer(tr.graph, lo).run().to_string();
    } catch (const std::exception& e) {
      return std::string("# not lowered: ") + e.what() + "\n";
    }
  };
  if (training_) return training_text([&](const runtime::CompiledGraph& g) { return unfused(g.trace()); });
  return graph_ && !opts_.extern_only ? unfused(graph_->trace()) : "";
}

py::dict CodegenGraph::timings() const {
  if (!training_ || training_->backward_build_s() < 0) return timings_;
  auto t = py::reinterpret_steal<py::dict>(PyDict_Copy(timings_.ptr()));  // a copy: the backward's build, on its first call, is not in timings_
  t["backward_build"] = training_->backward_build_s();
  t["backward_cache_hit"] = training_->backward_cache_hit();
  return t;
}

// For kiln/_cudagraphs.py: whether this graph can run inside a CUDA graph capture (compiled, for
// CUDA, tensors only, no inputs written in place), and that run, whose kernels' error flag is
// handed back in device memory (None without checks) rather than read with a host sync.
bool CodegenGraph::capturable() const {
  return state_ == kReady && graph_ && !training_ && int_args_.empty() && graph_->trace().graph.input_mutations.empty() &&
         graph_->num_kernels() > 0 && !graph_->trace().outputs.empty() && graph_->trace().outputs[0].is_cuda();
}

py::tuple CodegenGraph::run_for_capture(py::args args) {
  if (!capturable()) throw std::runtime_error("this graph cannot run in a CUDA graph");
  std::vector<at::Tensor> inputs = unpack_tensors(args, "inputs");
  at::Tensor flag;
  std::vector<at::Tensor> outs;
  {
    py::gil_scoped_release nogil;
    outs = graph_->run(inputs, &flag);
  }
  return py::make_tuple(pack(outs), flag.defined() ? py::reinterpret_steal<py::object>(THPVariable_Wrap(flag)) : py::none());
}

// The first build of a CPU graph: the kernels of a size template in the cache when this program
// is that template at this call's sizes (an earlier process fitted it: no build at a size never
// seen), else kernels for these sizes. Runs without the GIL (the graph is marked building).
runtime::BuildResult CodegenGraph::build_first(bridge::TraceResult tr) {
  auto t0 = std::chrono::steady_clock::now();
  ir::Program prog;
  try {
    prog = runtime::lower_graph(tr, opts_);
  } catch (const std::exception&) {
    return runtime::build_graph(std::move(tr), opts_);  // a CUDA graph, or the build reports it
  }
  const std::pair<std::string, double> lowered{"lower", since(t0)};
  const ir::ProgramInts ints = ir::program_ints(prog);
  if (auto found = runtime_sizes_ ? runtime::load_size_template(opts_, ints.shape) : std::nullopt) {
    std::vector<int> pos;
    size_t ndims = 0;
    if (ir::parse_symbols_note(found->second, &pos, &ndims) && ndims == base_dims_.size()) {
      symbol_pos_ = pos;
      std::vector<int64_t> sym = symbols_of(base_dims_);
      std::string why;
      if (ir::matches(found->first, ints, sym, &why)) {
        runtime::BuildResult r = runtime::build_for_sizes(tr, prog, found->first, sym, opts_);
        if (r.graph) {
          r.timings.insert(r.timings.begin(), lowered);
          template_ = std::move(found->first);
          sized_base_ = r.graph;
          ++size_builds_;
          size_status_ = served_text() + "; kernels from the cache's size template";
          return r;
        }
      }
      symbol_pos_.clear();
    }
  }
  runtime::BuildResult r = runtime::build_lowered(std::move(tr), std::move(prog), opts_);
  r.timings.insert(r.timings.begin(), lowered);
  return r;
}

// A call at a size signature the template may serve: traced on its inputs (the traced run is
// its result) and lowered; then either checked against the template (and served by its kernels
// from then on), or kept as a sample until three sizes give a template. nullopt: this call
// goes the per-size way (`variants_`).
std::optional<py::object> CodegenGraph::runtime_sizes(const std::vector<int64_t>& sig, const std::vector<at::Tensor>& inputs, const IntArgs& ints,
                                        py::args args) {
  if (sizes_off_ || rejected_.count(sig)) return std::nullopt;
  if (state_ != kReady || !graph_ || !same_layout(inputs, ints)) return std::nullopt;
  Building guard(building_);
  auto t0 = std::chrono::steady_clock::now();
  bridge::TraceResult tr;
  try {
    tr = bridge::trace(inputs, runner_with(ints));
  } catch (const std::exception&) {
    return std::nullopt;  // the per-size path traces again and reports it
  }
  add_size_time("sizes_trace", t0);
  for (const auto& [input, value] : tr.graph.input_mutations)
    if (at::has_internal_overlap(inputs.at(input)) == at::MemOverlap::Yes) return std::nullopt;
  if (output_views_a_mutated_input(tr.graph) || runtime::mutated_input_aliases(tr.graph.input_mutations, inputs)) return std::nullopt;
  for (size_t k = 0; k < tr.graph.input_mutations.size(); ++k)
    inputs.at(tr.graph.input_mutations[k].first).copy_(tr.mutation_results[k]);
  py::object result = pack(tr.outputs);
  tr.outputs.clear();
  tr.mutation_results.clear();
  const std::vector<int64_t> dims = call_dims(inputs, ints);
  ir::Program prog;
  try {
    py::gil_scoped_release nogil;
    runtime::BuildOptions varying = opts_;
    varying.sizes_vary = true;
    prog = runtime::lower_graph(tr, varying);
  } catch (const std::exception& e) {
    give_up_sizes(std::string("lowering failed: ") + e.what());
    rejected_.emplace(sig, 1);
    return result;
  }
  add_size_time("sizes_lower", t0);
  if (template_) {
    std::string why;
    const std::vector<int64_t> sym = symbols_of(dims);
    if (!ir::matches(*template_, ir::program_ints(prog), sym, &why)) {
      // Served by its own specialisation from its next call on.
      rejected_.emplace(sig, 1);
      size_status_ = "runtime sizes " + sizes_text(sym) + ": specialised (" + why + "); " + served_text();
      return result;
    }
    if (!add_sized(sig, std::move(tr), std::move(prog), sym, &why)) {
      rejected_.emplace(sig, 1);
      size_status_ = "runtime sizes " + sizes_text(sym) + ": specialised (" + why + "); " + served_text();
    }
    add_size_time("sizes_share", t0);
    first_sized_run(sig, inputs);
    add_size_time("sizes_first_run", t0);
    return result;
  }
  samples_.push_back({sig, dims, std::move(tr), std::move(prog)});
  fit_sizes();
  add_size_time("sizes_fit", t0);
  first_sized_run(sig, inputs);
  add_size_time("sizes_first_run", t0);
  return result;
}

py::object CodegenGraph::fall_back(const std::string& why, py::args args) {
  state_ = kEager;
  status_ = "eager: " + why;
  if (!on_compiled_.is_none()) on_compiled_(this);
  return decline(why, args);
}

// This call runs eagerly with its inputs untouched: under kiln's frontend the whole frame does
// (GraphDeclined), so what the frame replays after its graph stays in order with whatever the
// eager run raises; elsewhere (PyTorch's Dynamo) the graph runs eagerly here.
py::object CodegenGraph::decline(const std::string& why, py::args args) {
  if (!frontend_) return eager_(*args);
  PyErr_SetString(frontend::g_graph_declined, why.c_str());
  throw py::error_already_set();
}

py::object CodegenGraph::pack(const std::vector<at::Tensor>& outs) {
  if (single_) return py::reinterpret_steal<py::object>(THPVariable_Wrap(outs.at(0)));
  py::tuple t = wrap_tensors(outs);
  return as_list_ ? py::object(py::list(t)) : py::object(t);
}

void CodegenGraph::finish(runtime::BuildResult r) {
  double total = trace_s_;
  for (const auto& [stage, secs] : r.timings) {
    timings_[py::str(stage)] = secs;
    total += secs;
  }
  timings_["total"] = total;
  for (const auto& [what, n] : r.counts) timings_[py::str(what)] = n;  // beside the seconds, not in the total
  timings_["cache_hit"] = r.cache_hit;
  source_ = std::move(r.source);
  source_of_training_ = false;
  if (r.graph) {
    graph_ = std::move(r.graph);
    state_ = kReady;
    status_ = "compiled";
  } else {
    state_ = kEager;
    status_ = "eager: " + r.error;
  }
  if (!on_compiled_.is_none()) on_compiled_(this);
}

bridge::GraphRunner CodegenGraph::runner_with(const IntArgs& ints) {
  py::object fn = eager_;
  bool* single = &single_;
  bool* as_list = &as_list_;
  return [fn, single, as_list, ints](const std::vector<at::Tensor>& in) {
    py::tuple all(in.size() + ints.size());
    size_t t = 0, k = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (k < ints.size() && ints[k].first == i) all[i] = py::int_(ints[k++].second);
      else all[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(in.at(t++)));
    }
    py::object r = fn(*all);
    *single = THPVariable_Check(r.ptr());
    *as_list = py::isinstance<py::list>(r);
    if (*single) return std::vector<at::Tensor>{THPVariable_Unpack(r.ptr())};
    if (!py::isinstance<py::tuple>(r) && !*as_list) throw std::runtime_error("the graph returned something other than tensors");
    return unpack_tensors(r, "the graph's results");
  };
}

py::object CodegenGraph::first_call(const std::vector<at::Tensor>& inputs, py::args args) {
  Building guard(building_);
  auto t0 = std::chrono::steady_clock::now();
  bridge::TraceResult tr;
  try {
    tr = bridge::trace(inputs, runner());
  } catch (const py::error_already_set& e) {
    // If eager raises too, the inputs were bad (a zero divisor, a shape mismatch): that is
    // the user's exception, and the next call traces again. Otherwise kiln could not trace it.
    std::string why = std::string("trace failed: ") + message_of(e);
    if (frontend_) {  // the frame reruns eagerly; a second failure gives up on generated code
      if (++trace_failures_ >= 2) {
        state_ = kEager;
        status_ = "eager: " + why;
        if (!on_compiled_.is_none()) on_compiled_(this);
      }
      return decline(why, args);
    }
    py::object r = eager_(*args);
    state_ = kEager;
    status_ = "eager: " + why;
    if (!on_compiled_.is_none()) on_compiled_(this);
    return r;
  } catch (const std::exception& e) {
    return fall_back(std::string("trace failed: ") + message_of(e), args);
  }
  tr = bridge::plan_channels_last(std::move(tr), inputs, runner());  // CUDA convolutions: NHWC
  // Writing a result back into an input whose elements share memory (an expanded tensor) is
  // what eager's in-place kernels allow and copy_ refuses: such a graph runs eagerly, from its
  // untouched inputs.
  for (const auto& [input, value] : tr.graph.input_mutations)
    if (at::has_internal_overlap(inputs.at(input)) == at::MemOverlap::Yes)
      return fall_back("an input mutated in place has overlapping memory (an expanded tensor)", args);
  if (output_views_a_mutated_input(tr.graph))
    return fall_back("an output is a view of an input the graph writes in place (eager returns the input's view)", args);
  // Inputs that alias one another where one is written: this call runs eagerly (the trace left
  // the inputs untouched) and the next call traces again.
  if (runtime::mutated_input_aliases(tr.graph.input_mutations, inputs)) return decline("an input written in place shares memory with another input", args);
  std::string why;
  if (!note_cuda_device(inputs, opts_, &why)) return fall_back(why, args);
  trace_s_ = since(t0);
  timings_["trace"] = trace_s_;
  // The traced run is this call's result (with real views of the inputs where eager returns
  // them); apply its input mutations as eager would.
  std::vector<at::Tensor> results = tr.outputs;
  runtime::remake_input_views(tr, inputs, results);
  {
    c10::NoGradGuard no_grad;  // the graph's own writes: recorded by no autograd (see call())
    for (size_t k = 0; k < tr.graph.input_mutations.size(); ++k)
      inputs.at(tr.graph.input_mutations[k].first).copy_(tr.mutation_results[k]);
  }
  trace_text_ = tr.graph.to_string();
  if (background_) {
    pending_ = std::make_unique<runtime::BackgroundBuild>(std::move(tr), opts_);
    state_ = kCompiling;
    status_ = "compiling";
  } else {
    runtime::BuildResult r;
    const bool cpu = opts_.cuda_device < 0 && !opts_.extern_only;
    {
      py::gil_scoped_release nogil;
      r = cpu ? build_first(std::move(tr)) : runtime::build_graph(std::move(tr), opts_);
    }
    // mode="max-autotune": time each CUDA kernel's configurations on this call's inputs, or
    // take the choices an earlier process made (before the graph is reported compiled).
    if (opts_.autotune && r.graph && r.graph->on_cuda()) {
      auto t = std::chrono::steady_clock::now();
      try {
        py::gil_scoped_release nogil;
        autotune_status_ = r.graph->autotune(inputs);
      } catch (const std::exception& e) {
        autotune_status_ = std::string("autotuning failed: ") + e.what();
      }
      r.timings.push_back({"autotune", since(t)});
    }
    finish(std::move(r));
  }
  return pack(results);
}

}  // namespace kiln::python
