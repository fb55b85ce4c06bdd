// Bindings for the code generator: the tracer (for tests and dumps) and the compiled-graph
// callable that backend="kiln" and kiln.backend hand back. Its training calls run the compiled
// forward/backward pairs of training_stages.h.
#include <ATen/SavedTensorHooks.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/MemoryOverlap.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "lowering/lowerer.h"
#include "python/training_sizes.h"
#include "python/training_stages.h"
#include "frontend/hook/frame_dispatch.h"
#include "runtime/compiled_graph.h"
#include "runtime/output_views.h"
#include "runtime/graph_build.h"
#include "torch_bridge/channels_last.h"
#include "torch_bridge/tracer.h"

namespace py = pybind11;

namespace kiln::python {

// An exception's message without the C++ backtrace a c10::Error carries (statuses and fallback
// reasons are read by people, in explain() and the report).
static std::string message_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

// For kiln/_cudagraphs.py: whether a CUDA graph capture serves a call's arguments. The capture
// reads parameters in place (their data pointers must be the captured ones) and copies the other
// tensors in (their layouts must be the captured ones; a parameter there has a capture of its
// own). Checked per call in C++ rather than walking a model's hundreds of parameters in Python
// (about 20 us a call for NanoGPT's 150 on an H100 host).
class CaptureCheck {
 public:
  CaptureCheck(py::handle args, py::handle parameter_type) : parameter_type_(py::reinterpret_borrow<py::object>(parameter_type)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(args);
    n_ = static_cast<Py_ssize_t>(py::len(seq));
    for (Py_ssize_t i = 0; i < n_; ++i) {
      py::object a = seq[static_cast<size_t>(i)];
      if (!THPVariable_Check(a.ptr())) throw py::type_error("a CUDA graph capture takes tensors only");
      const at::Tensor& t = THPVariable_Unpack(a.ptr());
      const int is_param = PyObject_IsInstance(a.ptr(), parameter_type.ptr());
      if (is_param < 0) throw py::error_already_set();
      if (is_param) params_.push_back({i, t.data_ptr()});
      else copied_.push_back({i, t.sizes().vec(), t.strides().vec(), t.scalar_type(), t.device()});
    }
  }
  bool matches(py::handle args) const {
    PyObject* seq = args.ptr();
    if (!PyTuple_Check(seq) && !PyList_Check(seq)) return false;
    if (PySequence_Fast_GET_SIZE(seq) != n_) return false;
    PyObject** items = PySequence_Fast_ITEMS(seq);
    for (const Param& p : params_) {
      PyObject* a = items[p.index];
      if (!THPVariable_Check(a) || THPVariable_Unpack(a).data_ptr() != p.ptr) return false;
    }
    for (const Copied& c : copied_) {
      PyObject* a = items[c.index];
      if (!THPVariable_Check(a)) return false;
      const at::Tensor& t = THPVariable_Unpack(a);
      if (t.scalar_type() != c.dtype || t.device() != c.device || t.sizes() != c10::IntArrayRef(c.sizes) || t.strides() != c10::IntArrayRef(c.strides))
        return false;
      const int is_param = PyObject_IsInstance(a, parameter_type_.ptr());
      if (is_param != 0) {
        PyErr_Clear();
        return false;
      }
    }
    return true;
  }

 private:
  struct Param { Py_ssize_t index; const void* ptr; };
  struct Copied { Py_ssize_t index; std::vector<int64_t> sizes, strides; at::ScalarType dtype; c10::Device device; };
  py::object parameter_type_;
  Py_ssize_t n_ = 0;
  std::vector<Param> params_;
  std::vector<Copied> copied_;
};

std::vector<at::Tensor> unpack_tensors(py::handle seq, const char* what) {
  std::vector<at::Tensor> out;
  for (py::handle h : seq) {
    if (!THPVariable_Check(h.ptr())) throw py::type_error(std::string(what) + " must be tensors");
    out.push_back(THPVariable_Unpack(h.ptr()));
  }
  return out;
}

py::tuple wrap_tensors(const std::vector<at::Tensor>& ts) {
  py::tuple t(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) t[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(ts[i]));
  return t;
}

// Runs a Python callable (the graph) on tensors from C++, returning its tensor results.
bridge::GraphRunner python_runner(py::object fn) {
  return [fn](const std::vector<at::Tensor>& inputs) {
    py::object r = fn(*wrap_tensors(inputs));
    if (THPVariable_Check(r.ptr())) return std::vector<at::Tensor>{THPVariable_Unpack(r.ptr())};
    if (!py::isinstance<py::tuple>(r) && !py::isinstance<py::list>(r)) throw std::runtime_error("the graph must return a tensor or a tuple/list of tensors");
    return unpack_tensors(r, "the graph's results");
  };
}

static double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether one of `outputs` is a view (through view ops) of one of `targets`.
bool views_one_of(const ir::AtenGraph& g, const std::vector<int>& outputs, const std::set<int>& targets) {
  for (int v : outputs)
    for (int w : ir::view_chain(g, v))
      if (targets.count(w)) return true;
  return false;
}
// Whether a graph output is a view (through view ops) of the new contents of an input the graph
// writes in place. Eager returns a view of the input itself there (`a.div_(2); return a[0]`), and
// code after a graph break may write through it; generated code returns a fresh tensor.
static bool output_views_a_mutated_input(const ir::AtenGraph& g) {
  std::set<int> mutated;
  for (const auto& [input, value] : g.input_mutations) mutated.insert(value);
  return views_one_of(g, g.outputs, mutated);
}

// The CUDA device of a call's tensors, noted in the build options with its compute capability
// (asked of PyTorch): a graph on a CUDA device is built for it (runtime/graph_build.h). False
// when the tensors span several CUDA devices.
bool note_cuda_device(const std::vector<at::Tensor>& inputs, runtime::BuildOptions& opts, std::string* why) {
  int device = -1;
  for (const auto& t : inputs) {
    if (!t.defined() || !t.is_cuda()) continue;
    if (device >= 0 && t.device().index() != device) {
      *why = "the graph's inputs are on several CUDA devices";
      return false;
    }
    device = t.device().index();
  }
  if (device < 0 || opts.cuda_device == device) return true;
  opts.cuda_device = device;
  py::tuple cap = py::module_::import("torch.cuda").attr("get_device_capability")(device);
  opts.cuda_arch = cap[0].cast<int>() * 10 + cap[1].cast<int>();
  return true;
}

// Whether a debugger is tracing this thread: sys.settrace (pdb, most IDEs) or, on 3.12, a tool
// registered as sys.monitoring's debugger. Asked only by graphs compiled with a debug dump on.
static bool debugger_attached() {
  if (PyThreadState_Get()->c_traceobj) return true;
#if PY_VERSION_HEX >= 0x030C0000
  static PyObject* get_tool = [] {
    PyObject* f = nullptr;
    if (PyObject* sys = PyImport_ImportModule("sys")) {
      if (PyObject* mon = PyObject_GetAttrString(sys, "monitoring")) {
        f = PyObject_GetAttrString(mon, "get_tool");
        Py_DECREF(mon);
      }
      Py_DECREF(sys);
    }
    PyErr_Clear();
    return f;  // kept for the process's life
  }();
  if (get_tool) {
    PyObject* tool = PyObject_CallFunction(get_tool, "i", 0);  // sys.monitoring.DEBUGGER_ID
    bool on = tool && tool != Py_None;
    Py_XDECREF(tool);
    PyErr_Clear();
    return on;
  }
#endif
  return false;
}

// Sizes and strides of every tensor input and the value of every int input, flattened: which
// specialisation of a graph a call needs.
using IntArgs = std::vector<std::pair<size_t, int64_t>>;  // (argument position, value)
static std::vector<int64_t> size_signature(const std::vector<at::Tensor>& inputs, const IntArgs& ints) {
  std::vector<int64_t> sig;
  for (const auto& [pos, v] : ints) {
    sig.push_back(-1 - static_cast<int64_t>(pos));
    sig.push_back(v);
  }
  for (const auto& t : inputs) {
    sig.push_back(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      sig.push_back(t.size(d));
      sig.push_back(t.size(d) > 1 ? t.stride(d) : 0);
    }
  }
  return sig;
}

// Per input, the position of the first input that is the same tensor (a tensor passed twice,
// f(x, x), or a parameter two modules share); empty when all are distinct (the common case).
static std::vector<int> first_of_repeated(const std::vector<at::Tensor>& inputs) {
  std::vector<std::pair<const c10::TensorImpl*, int>> by_impl;
  by_impl.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) by_impl.emplace_back(inputs[i].unsafeGetTensorImpl(), static_cast<int>(i));
  std::sort(by_impl.begin(), by_impl.end());
  std::vector<int> first;
  for (size_t k = 1; k < by_impl.size(); ++k) {
    if (by_impl[k].first != by_impl[k - 1].first) continue;
    if (first.empty()) {
      first.resize(inputs.size());
      for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int>(i);
    }
    first[by_impl[k].second] = first[by_impl[k - 1].second];  // sorted by position within a tensor
  }
  return first;
}

// The callable handed back for a graph. The first call (without autograd) traces the graph on
// its real inputs, which also produces that call's results; then the graph is built (lowered,
// generated, compiled or loaded from the cache) with the GIL released, or on a background thread
// while calls keep running eagerly. Anything that fails makes this graph run eagerly from then
// on, with the reason kept in `status`.
//
// A graph with symbolic dimensions is called with inputs of many sizes. Automatic dynamic at the
// code generator (CPU inference): a call at a new size signature is traced (the traced run is
// its result) and lowered; once three sizes have been seen, the dimensions whose sizes differ
// become size symbols and the programs are fitted into one template (ir/size_template.h) whose
// kernels take the sizes at run time: one build serves every size whose own lowering is the
// template's at that size (checked at its first call, which is traced). Where no template fits
// (lowering decided differently at some size, an integer that is no polynomial of the sizes, a
// CUDA graph) the graph keeps one specialisation per size signature, with the reason in
// `size_status`: the first `max_variants` get their own build; calls at other sizes run the
// graph op by op.
class CodegenGraph {
 public:
  CodegenGraph(py::object eager, std::string cache_dir, py::object on_compiled, bool fuse, bool background, int jobs, bool frontend,
               int max_variants = 8, bool min_cut = true, bool extern_only = false, bool enables_grad = false, bool debug = false, bool autotune = false,
               bool runtime_sizes = true)
      : eager_(std::move(eager)), on_compiled_(std::move(on_compiled)), background_(background), frontend_(frontend),
        max_variants_(max_variants), min_cut_(min_cut), enables_grad_(enables_grad), debug_(debug), runtime_sizes_(runtime_sizes) {
    if (!runtime_sizes_) sizes_off_ = true, size_status_ = "runtime sizes off (option runtime_sizes)";
    opts_.cache_dir = std::move(cache_dir);
    opts_.fuse = fuse;
    opts_.extern_only = extern_only;
    opts_.jobs = jobs;
    opts_.autotune = autotune;
  }
  ~CodegenGraph() {
    // The builder may release tensors whose Python objects need the GIL.
    py::gil_scoped_release nogil;
    pending_.reset();
  }

  py::object call(py::args args) {
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
  void wait() {
    if (state_ != kCompiling) return;
    runtime::BuildResult r;
    {
      py::gil_scoped_release nogil;
      r = pending_->take();
      pending_.reset();
    }
    finish(std::move(r));
  }

  std::string status() const { return status_; }
  // A text of both halves of a training graph, headed "# forward" and "# backward".
  // The backward's text says so until its first call builds it.
  template <class TextOf>
  std::string training_text(TextOf text_of) const {
    std::shared_ptr<runtime::CompiledGraph> bwd = training_->backward_if_built();
    return "# forward\n" + text_of(*training_->fwd) + "# backward\n" + (bwd ? text_of(*bwd) : std::string("# built on the first backward call\n"));
  }
  std::string graph_text() const {
    if (training_) return training_text([](const runtime::CompiledGraph& g) { return g.trace().graph.to_string(); });
    return graph_ ? graph_->trace().graph.to_string() : trace_text_;
  }
  std::string program_text() const {
    if (training_) return training_text([](const runtime::CompiledGraph& g) { return g.program().to_string(); });
    return graph_ ? graph_->program().to_string() : "";
  }
  // The loop IR before fusion (the debug dump's loop_ir_unfused.txt): the traced graph lowered
  // again with every value realized in its own kernel; program_text is the program that runs.
  std::string unfused_program_text() const {
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
  std::string source() const { return source_of_training_ && training_ ? training_->source() + source_ : source_; }
  py::dict timings() const {
    if (!training_ || training_->backward_build_s() < 0) return timings_;
    auto t = py::reinterpret_steal<py::dict>(PyDict_Copy(timings_.ptr()));  // a copy: the backward's build, on its first call, is not in timings_
    t["backward_build"] = training_->backward_build_s();
    t["backward_cache_hit"] = training_->backward_cache_hit();
    return t;
  }
  bool compiled() const { return state_ == kReady; }
  size_t num_kernels() const { return graph_ ? graph_->num_kernels() : 0; }
  size_t num_externs() const { return graph_ ? graph_->num_externs() : 0; }
  size_t num_specializations() const { return variants_.size() + (training_builds_ > 1 ? training_builds_ - 1 : 0); }
  // Runtime sizes: how this graph serves sizes other than its first call's (see the class comment).
  std::string size_status() const { return size_status_; }
  size_t num_size_builds() const { return size_builds_ + training_sizes_.builds(); }  // kernel sets built (or loaded) for runtime sizes
  size_t num_sizes_served() const { return sized_.size() + training_sizes_.served(); }  // size signatures those kernels run
  size_t num_sizes_run_at_first_call() const { return sizes_run_at_first_call_; }  // see first_sized_run
  // For kiln/_cudagraphs.py: whether this graph can run inside a CUDA graph capture (compiled, for
  // CUDA, tensors only, no inputs written in place), and that run, whose kernels' error flag is
  // handed back in device memory (None without checks) rather than read with a host sync.
  bool capturable() const {
    return state_ == kReady && graph_ && !training_ && int_args_.empty() && graph_->trace().graph.input_mutations.empty() &&
           graph_->num_kernels() > 0 && !graph_->trace().outputs.empty() && graph_->trace().outputs[0].is_cuda();
  }
  py::tuple run_for_capture(py::args args) {
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
  std::string training_status() const { return training_status_; }
  std::string autotune_status() const { return autotune_status_; }

 private:
  enum State { kNew, kCompiling, kReady, kEager };

  // The first build of a CPU graph: the kernels of a size template in the cache when this program
  // is that template at this call's sizes (an earlier process fitted it: no build at a size never
  // seen), else kernels for these sizes. Runs without the GIL (the graph is marked building).
  runtime::BuildResult build_first(bridge::TraceResult tr) {
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
  // Every tensor input's sizes and every int input's value, flattened (positions line up between
  // calls whose inputs have the same ranks).
  static std::vector<int64_t> call_dims(const std::vector<at::Tensor>& inputs, const IntArgs& ints) {
    std::vector<int64_t> d;
    for (const auto& [pos, v] : ints) d.push_back(v);
    for (const auto& t : inputs)
      for (int64_t i = 0; i < t.dim(); ++i) d.push_back(t.size(i));
    return d;
  }
  // What each position of call_dims is: "int input 2", "input 0 dim 1".
  static std::vector<std::string> call_dim_names(const std::vector<at::Tensor>& inputs, const IntArgs& ints) {
    std::vector<std::string> names;
    for (const auto& [pos, v] : ints) names.push_back("int input " + std::to_string(pos));
    for (size_t i = 0; i < inputs.size(); ++i)
      for (int64_t d = 0; d < inputs[i].dim(); ++d) names.push_back("input " + std::to_string(i) + " dim " + std::to_string(d));
    return names;
  }
  bool same_layout(const std::vector<at::Tensor>& inputs, const IntArgs& ints) const {
    if (ints.size() != int_args_.size() || inputs.size() != base_ranks_.size()) return false;
    for (size_t i = 0; i < ints.size(); ++i)
      if (ints[i].first != int_args_[i].first) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].dim() != base_ranks_[i]) return false;
    return true;
  }
  std::vector<int64_t> symbols_of(const std::vector<int64_t>& dims) const { return ir::symbol_values(symbol_pos_, dims); }

  // A call at a size signature the template may serve: traced on its inputs (the traced run is
  // its result) and lowered; then either checked against the template (and served by its kernels
  // from then on), or kept as a sample until three sizes give a template. nullopt: this call
  // goes the per-size way (`variants_`).
  std::optional<py::object> runtime_sizes(const std::vector<int64_t>& sig, const std::vector<at::Tensor>& inputs, const IntArgs& ints,
                                          py::args args) {
    if (sizes_off_ || rejected_.count(sig)) return std::nullopt;
    if (state_ != kReady || !graph_ || !same_layout(inputs, ints)) return std::nullopt;
    Building guard(building_);
    bridge::TraceResult tr;
    try {
      tr = bridge::trace(inputs, runner_with(ints));
    } catch (const std::exception&) {
      return std::nullopt;  // the per-size path traces again and reports it
    }
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
      prog = runtime::lower_graph(tr, opts_);
    } catch (const std::exception& e) {
      give_up_sizes(std::string("lowering failed: ") + e.what());
      rejected_.emplace(sig, 1);
      return result;
    }
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
      first_sized_run(sig, inputs);
      return result;
    }
    samples_.push_back({sig, dims, std::move(tr), std::move(prog)});
    fit_sizes();
    first_sized_run(sig, inputs);
    return result;
  }

  // A size the runtime-size kernels now serve was traced on this call (an eager run: its result),
  // so its first compiled run would be its next call, and on CUDA that run pays what a process
  // pays once per shape: the bias+GELU epilogue matmuls (_addmm_activation, which the traced run
  // never calls) wait 7-11 ms in cuBLASLt at their first call at a new M (seen on an H200 at
  // dyn_seq's lengths 256-448; 0.2 ms at longer ones). The bench's timed round over dyn_seq's 16
  // lengths, the second call at 13 of them, took 5.45 ms a call (inductor 5.10); 3.59 with this
  // (inductor 5.24, same machine). The compiled graph (kernels and extern calls) runs once here,
  // on this call's inputs, its outputs discarded, where a run may be repeated
  // (CompiledGraph::rerunnable); a run that fails leaves the size to its own specialisation. CPU
  // graphs are not run twice: nothing of that size waits there, and their first call would pay
  // the whole run again.
  void first_sized_run(const std::vector<int64_t>& sig, const std::vector<at::Tensor>& inputs) {
    auto it = sized_.find(sig);
    // CUDA inputs: a program of extern calls alone (an MLP's matmuls) has no kernels of kiln's.
    const bool cuda = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.defined() && t.is_cuda(); });
    if (it == sized_.end() || !cuda || !it->second->rerunnable()) return;
    try {
      py::gil_scoped_release nogil;
      it->second->run(inputs);
    } catch (const std::exception& e) {
      sized_.erase(it);
      rejected_.emplace(sig, 1);
      size_status_ = std::string("runtime sizes: a size's first run failed (") + e.what() + "), specialised; " + served_text();
      return;
    }
    ++sizes_run_at_first_call_;
  }

  // With enough sizes sampled: the programs that lowered alike (the largest group of equal
  // shapes: a size where lowering decided otherwise, a coincidence of sizes that fused other
  // loops, is left to its own specialisation), the size symbols (the positions whose sizes differ
  // within the group, one symbol per set of positions that always agree), the template, and its
  // kernels. The first call's program is a member like any other, served by its own kernels.
  void fit_sizes() {
    struct Member { const std::vector<int64_t>* dims; const ir::Program* prog; int sample; };  // sample -1: the first call
    std::map<std::string, std::vector<Member>> by_shape;
    std::string last_shape;
    by_shape[ir::program_ints(graph_->program()).shape].push_back({&base_dims_, &graph_->program(), -1});
    for (size_t i = 0; i < samples_.size(); ++i) {
      last_shape = ir::program_ints(samples_[i].prog).shape;
      by_shape[last_shape].push_back({&samples_[i].dims, &samples_[i].prog, static_cast<int>(i)});
    }
    const std::vector<Member>* group = &by_shape[last_shape];
    for (const auto& [shape, members] : by_shape)
      if (members.size() > group->size()) group = &members;
    constexpr size_t kMaxSamples = 8;  // sizes traced without a template before giving up
    if (group->size() < 3) {
      if (samples_.size() >= kMaxSamples) return give_up_sizes("no three sizes lower alike (fusion, loop order, simplification or memory reuse differ)");
      size_status_ = "runtime sizes: sampling (" + std::to_string(samples_.size() + 1) + " sizes seen)";
      return;
    }
    std::vector<const std::vector<int64_t>*> dims;
    for (const Member& m : *group) dims.push_back(m.dims);
    bool enough = false;
    std::vector<int> pos = ir::symbol_positions(dims, &enough);
    if (!enough && samples_.size() < kMaxSamples) {
      size_status_ = "runtime sizes: sampling (" + std::to_string(samples_.size() + 1) + " sizes seen)";
      return;
    }
    symbol_pos_ = pos;
    std::vector<std::vector<int64_t>> syms;
    std::vector<ir::ProgramInts> ints;
    for (const Member& m : *group) {
      syms.push_back(symbols_of(*m.dims));
      ints.push_back(ir::program_ints(*m.prog));
    }
    std::string why;
    auto t = ir::fit_template(syms, ints, &why);
    if (!t) return give_up_sizes(why);
    std::vector<int> members;
    for (const Member& m : *group)
      if (m.sample >= 0) members.push_back(m.sample);
    // The kernels are generated from the member whose sizes have the most factors of two (the
    // last of equals): CUDA's vector accesses over a runtime-size stride are generated where the
    // sample allows them, and serve the sizes that allow them too.
    auto twos = [&](int i) { return ir::fewest_twos(symbols_of(samples_[i].dims)); };
    if (graph_->on_cuda()) std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return twos(a) < twos(b); });
    auto t0 = std::chrono::steady_clock::now();
    Sample& last = samples_.at(members.back());
    runtime::BuildResult r;
    {
      py::gil_scoped_release nogil;
      r = runtime::build_for_sizes(std::move(last.trace), std::move(last.prog), *t, symbols_of(last.dims), opts_);
    }
    if (!r.graph) return give_up_sizes("build failed: " + r.error);
    template_ = std::move(*t);
    ++size_builds_;
    timings_["runtime_sizes_build"] = since(t0);
    source_of_training_ = false;
    source_ += "// ==== kernels for runtime sizes (" + served_text() + ") ====\n" + r.source;
    runtime::store_size_template(opts_, *template_, ir::symbols_note(base_dims_.size(), symbol_pos_));
    sized_base_ = r.graph;
    sized_base_sig_ = last.sig;
    sized_[last.sig] = r.graph;
    for (size_t i = 0; i < samples_.size(); ++i) {
      Sample& s = samples_[i];
      if (static_cast<int>(i) == members.back()) continue;
      if (std::find(members.begin(), members.end(), static_cast<int>(i)) == members.end()) rejected_.emplace(s.sig, 1);
      else if (std::string why; !add_sized(s.sig, std::move(s.trace), std::move(s.prog), symbols_of(s.dims), &why)) rejected_.emplace(s.sig, 1);
    }
    samples_.clear();
    size_status_ = served_text();
    if (!on_compiled_.is_none()) on_compiled_(this);
  }

  // False (`why` set) where the shared CUDA kernels do not serve this program's sizes
  // (CompiledGraph::share_kernels): it is then specialised.
  bool add_sized(const std::vector<int64_t>& sig, bridge::TraceResult tr, ir::Program prog, std::vector<int64_t> sym, std::string* why) {
    // Each size keeps its program and extern-call arguments: a graph called at ever new sizes (a
    // cache growing forever) forgets the oldest, which is checked again if it comes back.
    constexpr size_t kMaxSizes = 512;
    if (sized_.size() >= kMaxSizes && !sized_order_.empty()) {
      if (sized_order_.front() != sized_base_sig_) sized_.erase(sized_order_.front());
      sized_order_.pop_front();
    }
    auto g = runtime::share_sized_kernels(std::move(tr), std::move(prog), *sized_base_, *template_, std::move(sym), why);
    if (!g) return false;
    sized_[sig] = std::move(g);
    sized_order_.push_back(sig);
    size_status_ = served_text();
    return true;
  }
  std::string sizes_text(const std::vector<int64_t>& sym) const {
    std::string s;
    for (size_t i = 0; i < sym.size(); ++i) s += (i ? ", s" : "s") + std::to_string(i) + "=" + std::to_string(sym[i]);
    return s;
  }
  std::string served_text() const {
    std::string where;
    for (size_t i = 0; i < symbol_pos_.size(); ++i) where += (i ? ", " : "") + std::string("s") + std::to_string(i) + " = " + dim_name(symbol_pos_[i]);
    return "runtime sizes: " + std::to_string(template_ ? template_->num_symbolic : 0) + " symbolic integers over " + where + "; one build serves " +
           std::to_string(sized_.size() + 1) + " size signatures (" + std::to_string(rejected_.size()) + " specialised)";
  }
  // "input 0 dim 1" or "int input 2" for a position of call_dims.
  std::string dim_name(int pos) const {
    if (pos < static_cast<int>(int_args_.size())) return "int input " + std::to_string(int_args_[pos].first);
    int p = pos - static_cast<int>(int_args_.size());
    int input = 0;
    while (input < static_cast<int>(base_ranks_.size()) && p >= base_ranks_[input]) p -= base_ranks_[input++];
    return "input " + std::to_string(input) + " dim " + std::to_string(p);
  }
  void give_up_sizes(const std::string& why) {
    sizes_off_ = true;
    size_status_ = "specialised per size: " + why;
    for (Sample& s : samples_) rejected_.emplace(s.sig, 1);
    samples_.clear();
    if (!on_compiled_.is_none()) on_compiled_(this);
  }

  py::object run_sized(runtime::CompiledGraph& g, const std::vector<at::Tensor>& inputs, py::args args) {
    std::vector<at::Tensor> outs;
    try {
      py::gil_scoped_release nogil;
      outs = g.run(inputs);
    } catch (const runtime::KernelCheckFailed& e) {
      return decline(e.what(), args);
    } catch (const runtime::InputMismatch& e) {
      return decline(e.what(), args);
    }
    return pack(outs);
  }

  py::object other_sizes(std::vector<int64_t> sig, const std::vector<at::Tensor>& inputs, const IntArgs& ints, py::args args) {
    auto sized = sized_.find(sig);
    if (sized != sized_.end()) return run_sized(*sized->second, inputs, args);
    for (auto& [s, g] : variants_)
      if (s == sig) return g->call(args);
    if (auto r = runtime_sizes(sig, inputs, ints, args)) return *r;
    // No kernels for these sizes and no room for more: the graph runs op by op (an exception
    // it raises makes the frame rerun eagerly, as for any graph).
    if (static_cast<int>(variants_.size()) >= variant_limit()) return eager_(*args);
    // A size the runtime-size kernels do not serve (lowering decided its kernels otherwise, as
    // where a length equals a head dimension and other loops fuse) runs op by op until it is
    // called a third time, then gets its own build, on a background thread: a size seen once
    // compiles nothing, and the other sizes keep running while one compiles.
    if (template_) {
      auto rejected = rejected_.find(sig);
      if (rejected != rejected_.end() && ++rejected->second < 3) return eager_(*args);
    }
    const bool background = background_ || template_.has_value();
    auto g = std::make_unique<CodegenGraph>(eager_, opts_.cache_dir, on_compiled_, opts_.fuse, background, opts_.jobs, frontend_, 0, min_cut_,
                                            opts_.extern_only, enables_grad_, debug_, opts_.autotune, runtime_sizes_);
    variants_.emplace_back(std::move(sig), std::move(g));
    return variants_.back().second->call(args);
  }

  // How many size signatures get kernels of their own. An NVRTC build is cheap next to a C++
  // compile: CUDA graphs get four times the option's number (sizes the runtime-size kernels do
  // not serve, such as odd lengths where vector code differs, still compile rather than run op by op).
  int variant_limit() const { return opts_.cuda_device >= 0 ? 4 * max_variants_ : max_variants_; }

  py::object fall_back(const std::string& why, py::args args) {
    state_ = kEager;
    status_ = "eager: " + why;
    if (!on_compiled_.is_none()) on_compiled_(this);
    return decline(why, args);
  }

  // This call runs eagerly with its inputs untouched: under kiln's frontend the whole frame does
  // (GraphDeclined), so what the frame replays after its graph stays in order with whatever the
  // eager run raises; elsewhere (PyTorch's Dynamo) the graph runs eagerly here.
  py::object decline(const std::string& why, py::args args) {
    if (!frontend_) return eager_(*args);
    PyErr_SetString(frontend::g_graph_declined, why.c_str());
    throw py::error_already_set();
  }

  py::object pack(const std::vector<at::Tensor>& outs) {
    if (single_) return py::reinterpret_steal<py::object>(THPVariable_Wrap(outs.at(0)));
    py::tuple t = wrap_tensors(outs);
    return as_list_ ? py::object(py::list(t)) : py::object(t);
  }

  void finish(runtime::BuildResult r) {
    double total = trace_s_;
    for (const auto& [stage, secs] : r.timings) {
      timings_[py::str(stage)] = secs;
      if (stage != "cuda_units") total += secs;  // a count, not seconds
    }
    timings_["total"] = total;
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

  // Runs the graph's Python form on tensors from C++ (with this graph's int inputs put back),
  // noting how it returns its results.
  bridge::GraphRunner runner() { return runner_with(int_args_); }
  bridge::GraphRunner runner_with(const IntArgs& ints) {
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

  // Training: a compiled forward/backward pair, built on the first call with a size signature
  // from a joint trace on detached copies; that call then runs the pair it built. A graph with symbolic
  // sizes trained on batches of several lengths gets one pair whose kernels take the sizes at run
  // time once three sizes planned alike (training_sizes.h); other sizes, and every size
  // where no template fits, get a pair each. Past max_variants_ of those, or once a build failed,
  // calls run the graph op by op (not declined: the frame stays one graph).
  //
  // A tensor passed more than once is one input of the pair (traced as one tensor, so a write to
  // one argument is seen through the other and its gradients are summed inside the backward);
  // which arguments repeat is part of the signature, and such calls get a pair per size.
  py::object training_call(const std::vector<at::Tensor>& all_inputs, const IntArgs& ints, py::args args) {
    std::vector<int64_t> sig = size_signature(all_inputs, ints);
    std::vector<int> first = first_of_repeated(all_inputs);
    std::vector<at::Tensor> distinct;
    if (!first.empty()) {
      sig.push_back(std::numeric_limits<int64_t>::min());  // then the repeated arguments
      sig.insert(sig.end(), first.begin(), first.end());
      for (size_t i = 0; i < first.size(); ++i)
        if (first[i] == static_cast<int>(i)) distinct.push_back(all_inputs[i]);
    }
    const std::vector<at::Tensor>& inputs = first.empty() ? all_inputs : distinct;
    auto found = trainings_.find(sig);
    if (found == trainings_.end()) {
      if (training_failed_) return eager_(*args);
      if (training_sizes_.pending(sig)) return eager_(*args);  // planned, waiting for the template
      if (runtime_sizes_ && !opts_.extern_only && !trainings_.empty() && first.empty()) {
        const std::vector<int64_t> dims = call_dims(inputs, ints);
        if (training_sizes_.wants(sig, dims)) return training_sample(std::move(sig), dims, inputs, ints, args);
      }
      if (training_builds_ >= variant_limit()) return eager_(*args);
      std::shared_ptr<TrainingStages> st = build_training(inputs, ints, first);
      if (!grad_free_) trainings_.emplace(sig, st);
      if (st) {
        if (training_builds_++ == 0 && first.empty()) training_sizes_.set_base(call_dims(inputs, ints), call_dim_names(inputs, ints), st);
        training_ = st;
      } else {
        training_failed_ = !grad_free_;
      }
      if (!on_compiled_.is_none()) on_compiled_(this);
      if (grad_free_) return call(args);
      if (st) return run_pair(st, inputs, args);
      return eager_(*args);
    }
    if (!found->second) return eager_(*args);
    return run_pair(found->second, inputs, args);
  }

  // One training call on a built pair, or eagerly where an input the pair writes in place shares
  // memory with another input (the pair reads them as independent values: the other would miss
  // the write) or with itself (an expanded tensor: eager's fill_ writes it, the copy back of the
  // new contents cannot), as inference graphs decline such calls; and where autograd records the
  // write (it requires grad) and it is a leaf or a view (eager raises for a leaf or a view of
  // one, at the write).
  py::object run_pair(const std::shared_ptr<TrainingStages>& st, const std::vector<at::Tensor>& inputs, py::args args) {
    if (!st->mutated_inputs.empty()) {
      if (runtime::written_input_aliases(st->mutated_inputs, [](int i) { return i; }, inputs)) return eager_(*args);
      for (size_t k = 0; k < st->mutated_inputs.size(); ++k) {
        const at::Tensor& t = inputs.at(st->mutated_inputs[k]);
        if (at::has_internal_overlap(t) == at::MemOverlap::Yes) return eager_(*args);
        if (st->output_requires_grad[st->num_outputs + k] && (t.is_leaf() || t.is_view())) return eager_(*args);
      }
    }
    return pack(run_training_call(st, inputs));
  }

  // A new size signature of a training graph with runtime sizes: planned (traced, partitioned,
  // lowered; no code generated) and handed to training_sizes_, which keeps it as a sample, fits
  // the templates or serves it with their kernels. The call runs eagerly.
  py::object training_sample(std::vector<int64_t> sig, const std::vector<int64_t>& dims, const std::vector<at::Tensor>& inputs,
                             const IntArgs& ints, py::args args) {
    {
      Building guard(building_);
      auto t0 = std::chrono::steady_clock::now();
      try {
        TrainingPlan plan = plan_training(inputs, runner_with(ints), opts_, min_cut_);
        for (auto& [s, st] : training_sizes_.add(sig, dims, std::move(plan), opts_, &source_)) trainings_[s] = std::move(st);
        if (training_sizes_.builds() && !timings_.contains("training_sizes_build")) timings_["training_sizes_build"] = since(t0);
      } catch (const std::exception& e) {  // py::error_already_set too: the per-size path traces again and reports it
        training_sizes_.give_up(std::string("planning failed: ") + message_of(e));
      }
      size_status_ = training_sizes_.status();
    }
    if (!on_compiled_.is_none()) on_compiled_(this);
    return eager_(*args);
  }

  // Traces the joint graph at these inputs, partitions it and builds both halves; null (with
  // training_status_ saying why) when any step fails.
  // `first`: first_of_repeated of the call's arguments, of which `inputs` are the distinct ones.
  std::shared_ptr<TrainingStages> build_training(const std::vector<at::Tensor>& inputs, const IntArgs& ints, const std::vector<int>& first) {
    Building guard(building_);
    auto t0 = std::chrono::steady_clock::now();
    bridge::GraphRunner run = runner_with(ints);
    if (!first.empty()) {  // the graph's Python form takes every argument: the distinct ones, repeated
      std::vector<int> distinct_of(first.size());
      for (size_t i = 0, k = 0; i < first.size(); ++i) distinct_of[i] = first[i] == static_cast<int>(i) ? static_cast<int>(k++) : distinct_of[first[i]];
      run = [run, distinct_of](const std::vector<at::Tensor>& in) {
        std::vector<at::Tensor> all;
        all.reserve(distinct_of.size());
        for (int k : distinct_of) all.push_back(in.at(k));
        return run(all);
      };
    }
    try {
      TrainingPlan plan = plan_training(inputs, run, opts_, min_cut_);
      std::shared_ptr<TrainingStages> st;
      if (runtime_sizes_ && !opts_.extern_only && first.empty()) st = training_sizes_.from_cache(plan, call_dims(inputs, ints), opts_);
      if (st) {
        size_status_ = training_sizes_.status();
      } else {
        // The backward builds on its first call, unless a debug dump (written now) is to show it.
        st = build_training_stages(std::move(plan), opts_, /*lazy_backward=*/!debug_);
        source_of_training_ = true;
        source_.clear();  // what runtime sizes' kernels add later
      }
      training_status_ = "compiled forward and backward; " + st->describe;
      if (training_builds_) training_status_ += " (" + std::to_string(training_builds_ + 1) + " size signatures built)";
      timings_["training_build"] = since(t0);
      return st;
    } catch (const py::error_already_set& e) {
      training_status_ = std::string("eager: ") + message_of(e);
    } catch (const std::exception& e) {
      training_status_ = std::string("eager: ") + message_of(e);
      if (std::strstr(e.what(), "no output requires grad")) {
        grad_free_ = true;
        training_status_ = "none needed: no output requires grad";
      }
    }
    return nullptr;
  }

  py::object first_call(const std::vector<at::Tensor>& inputs, py::args args) {
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

  py::object eager_;
  py::object on_compiled_;
  runtime::BuildOptions opts_;
  bool background_ = false;
  State state_ = kNew;
  std::string status_ = "not compiled yet";
  std::string trace_text_, source_;
  bool source_of_training_ = false;  // source() is the training pair's (training_->source()), then source_
  double trace_s_ = 0;
  py::dict timings_;
  std::unique_ptr<runtime::BackgroundBuild> pending_;
  std::shared_ptr<runtime::CompiledGraph> graph_;
  bool single_ = false, as_list_ = false;
  bool frontend_ = false;   // called by kiln's frontend, which can run the frame eagerly instead
  int trace_failures_ = 0;
  int max_variants_ = 8;
  bool min_cut_ = true;  // the partitioner for training graphs (else save everything the backward reads)
  bool enables_grad_ = false;  // the graph has a set_grad_enabled(True) node
  bool debug_ = false;         // compiled with a debug dump on: a tracing debugger runs the Python form
  bool building_ = false;  // a thread is in first_call / the training build (set and read under the GIL)
  struct Building {
    bool& flag;
    explicit Building(bool& f) : flag(f) { flag = true; }
    ~Building() { flag = false; }
  };
  std::shared_ptr<TrainingStages> training_;  // the last pair built (what program_text shows)
  std::map<std::vector<int64_t>, std::shared_ptr<TrainingStages>> trainings_;  // per size signature (null: eager)
  int training_builds_ = 0;         // pairs built for one size signature each
  TrainingSizes training_sizes_;    // the pair whose kernels take the sizes at run time
  bool training_failed_ = false;    // a build failed: every training call runs op by op
  std::string training_status_;     // empty until the first training call
  bool grad_free_ = false;          // inputs require grad but no output does: inference program
  std::string autotune_status_;     // mode="max-autotune": each kernel's chosen configuration
  std::vector<int64_t> signature_;  // of the call that traced this graph
  IntArgs int_args_;                // its int inputs, baked into the trace
  std::vector<std::pair<std::vector<int64_t>, std::unique_ptr<CodegenGraph>>> variants_;
  // Runtime sizes (see the class comment).
  struct Sample {
    std::vector<int64_t> sig, dims;
    bridge::TraceResult trace;
    ir::Program prog;
  };
  std::vector<int64_t> base_dims_;          // call_dims of the first call
  std::vector<int> base_ranks_;             // its tensor inputs' ranks
  std::vector<Sample> samples_;             // sizes traced before the template exists
  std::vector<int> symbol_pos_;             // per size symbol: its position in call_dims
  std::optional<ir::SizeTemplate> template_;
  std::shared_ptr<runtime::CompiledGraph> sized_base_;  // owns the kernels for runtime sizes
  std::map<std::vector<int64_t>, std::shared_ptr<runtime::CompiledGraph>> sized_;  // by size signature
  std::deque<std::vector<int64_t>> sized_order_;  // in the order they were added
  std::vector<int64_t> sized_base_sig_;
  std::map<std::vector<int64_t>, int> rejected_;  // size signatures the template does not serve -> calls
  bool runtime_sizes_ = true;                // the option: kernels for runtime sizes at all
  bool sizes_off_ = false;                   // no template: every size is specialised
  size_t size_builds_ = 0;
  size_t sizes_run_at_first_call_ = 0;
  std::string size_status_;
};

void bind_codegen(py::module_& m) {
  bind_training(m);
  py::class_<CaptureCheck>(m, "CaptureCheck",
                           "mode='reduce-overhead': whether a CUDA graph capture serves a call's arguments (one C++ call)")
      .def(py::init<py::handle, py::handle>(), py::arg("args"), py::arg("parameter_type"))
      .def("__call__", &CaptureCheck::matches);
  py::class_<CodegenGraph>(m, "CodegenGraph")
      .def(py::init<py::object, std::string, py::object, bool, bool, int, bool, int, bool, bool, bool, bool, bool, bool>(), py::arg("eager"), py::arg("cache_dir") = "",
           py::arg("on_compiled") = py::none(), py::arg("fuse") = true, py::arg("background") = false, py::arg("jobs") = 0,
           py::arg("frontend") = false, py::arg("max_variants") = 8, py::arg("min_cut") = true, py::arg("extern_only") = false,
           py::arg("enables_grad") = false, py::arg("debug") = false, py::arg("autotune") = false, py::arg("runtime_sizes") = true)
      .def_property_readonly("autotune_status", &CodegenGraph::autotune_status,
                             "mode='max-autotune': each CUDA kernel's chosen configuration, or why nothing was tuned")
      .def("__call__", &CodegenGraph::call)
      .def("wait", &CodegenGraph::wait, "Wait for a background build to finish.")
      .def_property_readonly("capturable", &CodegenGraph::capturable)
      .def("run_for_capture", &CodegenGraph::run_for_capture)
      .def_property_readonly("status", &CodegenGraph::status)
      .def_property_readonly("compiled", &CodegenGraph::compiled)
      .def_property_readonly("graph_text", &CodegenGraph::graph_text)
      .def_property_readonly("program_text", &CodegenGraph::program_text)
      .def_property_readonly("unfused_program_text", &CodegenGraph::unfused_program_text)
      .def_property_readonly("source", &CodegenGraph::source)
      .def_property_readonly("timings", &CodegenGraph::timings)
      .def_property_readonly("num_kernels", &CodegenGraph::num_kernels)
      .def_property_readonly("num_externs", &CodegenGraph::num_externs)
      .def_property_readonly("training_status", &CodegenGraph::training_status,
                             "for graphs called with autograd: how their forward and backward run")
      .def_property_readonly("num_specializations", &CodegenGraph::num_specializations,
                             "kernel sets built for other size signatures than the first call's")
      .def_property_readonly("size_status", &CodegenGraph::size_status,
                             "how sizes other than the first call's are served: runtime sizes, or why each size is specialised")
      .def_property_readonly("num_size_builds", &CodegenGraph::num_size_builds, "kernel sets built for runtime sizes (0 or 1)")
      .def_property_readonly("num_sizes_run_at_first_call", &CodegenGraph::num_sizes_run_at_first_call,
                             "sizes whose runtime-size kernels ran once already at the size's first (traced) call (CUDA)")
      .def_property_readonly("num_sizes_served", &CodegenGraph::num_sizes_served,
                             "size signatures (besides the first call's) that the runtime-size kernels serve");
  m.def("_trace", [](py::object fn, py::sequence inputs) {
    bridge::TraceResult r;
    try {
      r = bridge::trace(unpack_tensors(inputs, "inputs"), python_runner(fn));
    } catch (const py::error_already_set&) {
      throw;
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("kiln trace failed: ") + e.what());
    }
    return py::make_tuple(r.graph.to_string(), wrap_tensors(r.outputs));
  }, "Trace fn(*inputs) at the ATen level: returns (graph text, real outputs).");
}

}  // namespace kiln::python
