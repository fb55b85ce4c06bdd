// Bindings for the code generator: the tracer (for tests and dumps), the compiled-graph callable
// that backend="kiln" and kiln.backend hand back (CodegenGraph, codegen_graph.h), the check of
// reduce-overhead's CUDA graph captures, and the helpers they share.
#include "python/codegen_graph/codegen_graph.h"

namespace kiln::python {

// An exception's message without the C++ backtrace a c10::Error carries (statuses and fallback
// reasons are read by people, in explain() and the report).
std::string message_of(const std::exception& e) {
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

double since(std::chrono::steady_clock::time_point t0) {
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
bool output_views_a_mutated_input(const ir::AtenGraph& g) {
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
bool debugger_attached() {
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
std::vector<int64_t> size_signature(const std::vector<at::Tensor>& inputs, const IntArgs& ints) {
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
std::vector<int> first_of_repeated(const std::vector<at::Tensor>& inputs) {
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
