// Bindings for the code generator: the tracer (for tests and dumps) and the compiled-graph
// callable that backend="kiln" and kiln.backend hand back.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <c10/core/GradMode.h>

#include <chrono>
#include <memory>

#include "codegen/cpp/cpp_codegen.h"
#include "lowering/lowerer.h"
#include "runtime/compiled_graph.h"
#include "runtime/cpp_compiler.h"
#include "schedule/memory_plan.h"
#include "torch_bridge/tracer.h"

namespace py = pybind11;

namespace kiln::python {

static std::vector<at::Tensor> unpack_tensors(py::handle seq, const char* what) {
  std::vector<at::Tensor> out;
  for (py::handle h : seq) {
    if (!THPVariable_Check(h.ptr())) throw py::type_error(std::string(what) + " must be tensors");
    out.push_back(THPVariable_Unpack(h.ptr()));
  }
  return out;
}

static py::tuple wrap_tensors(const std::vector<at::Tensor>& ts) {
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

// The callable handed back for a graph. The first call (without autograd) traces the graph on
// its real inputs, which also produces that call's results, then lowers, generates C++,
// compiles (or loads from the cache) and keeps the CompiledGraph for later calls. Anything that
// fails makes this graph run eagerly from then on, with the reason kept in `status`.
class CodegenGraph {
 public:
  CodegenGraph(py::object eager, std::string cache_dir, py::object on_compiled, bool fuse)
      : eager_(std::move(eager)), cache_dir_(std::move(cache_dir)), on_compiled_(std::move(on_compiled)), fuse_(fuse) {}

  py::object call(py::args args) {
    if (state_ == kEager) return eager_(*args);
    std::vector<at::Tensor> inputs;
    bool needs_grad = false;
    for (py::handle h : args) {
      if (!THPVariable_Check(h.ptr())) return fall_back("a graph input is not a tensor", args);
      inputs.push_back(THPVariable_Unpack(h.ptr()));
      needs_grad |= inputs.back().requires_grad();
    }
    // Training graphs need kiln's autograd layer, which is not built yet: run them eagerly.
    if (needs_grad && c10::GradMode::is_enabled()) return eager_(*args);
    if (state_ == kReady) {
      std::vector<at::Tensor> outs;
      {
        py::gil_scoped_release nogil;
        outs = graph_->run(inputs);
      }
      return pack(outs);
    }
    return first_call(inputs, args);
  }

  std::string status() const { return status_; }
  std::string graph_text() const { return graph_ ? graph_->trace().graph.to_string() : trace_text_; }
  std::string program_text() const { return graph_ ? graph_->program().to_string() : ""; }
  std::string source() const { return source_; }
  py::dict timings() const { return timings_; }
  bool compiled() const { return state_ == kReady; }
  size_t num_kernels() const { return graph_ ? graph_->num_kernels() : 0; }
  size_t num_externs() const { return graph_ ? graph_->num_externs() : 0; }

 private:
  enum State { kNew, kReady, kEager };

  py::object fall_back(const std::string& why, py::args args) {
    state_ = kEager;
    status_ = "eager: " + why;
    if (!on_compiled_.is_none()) on_compiled_(this);
    return eager_(*args);
  }

  py::object pack(const std::vector<at::Tensor>& outs) {
    if (single_) return py::reinterpret_steal<py::object>(THPVariable_Wrap(outs.at(0)));
    py::tuple t = wrap_tensors(outs);
    return as_list_ ? py::object(py::list(t)) : py::object(t);
  }

  py::object first_call(const std::vector<at::Tensor>& inputs, py::args args) {
    auto t0 = std::chrono::steady_clock::now();
    bridge::TraceResult tr;
    try {
      py::object fn = eager_;
      bool* single = &single_;
      bool* as_list = &as_list_;
      tr = bridge::trace(inputs, [fn, single, as_list](const std::vector<at::Tensor>& in) {
        py::object r = fn(*wrap_tensors(in));
        *single = THPVariable_Check(r.ptr());
        *as_list = py::isinstance<py::list>(r);
        if (*single) return std::vector<at::Tensor>{THPVariable_Unpack(r.ptr())};
        if (!py::isinstance<py::tuple>(r) && !*as_list) throw std::runtime_error("the graph returned something other than tensors");
        return unpack_tensors(r, "the graph's results");
      });
    } catch (const py::error_already_set& e) {
      return fall_back(std::string("trace failed: ") + e.what(), args);
    } catch (const std::exception& e) {
      return fall_back(std::string("trace failed: ") + e.what(), args);
    }
    timings_["trace"] = since(t0);
    // The traced run is this call's result; apply its input mutations as eager would.
    std::vector<at::Tensor> results = tr.outputs;
    for (size_t k = 0; k < tr.graph.input_mutations.size(); ++k)
      inputs.at(tr.graph.input_mutations[k].first).copy_(tr.mutation_results[k]);
    trace_text_ = tr.graph.to_string();
    try {
      auto t1 = std::chrono::steady_clock::now();
      lowering::LoweringOptions lo;
      lo.fuse = fuse_;
      ir::Program prog = lowering::Lowerer(tr.graph, lo).run();
      schedule::plan_memory(prog);
      timings_["lower"] = since(t1);
      std::string key = runtime::hex(runtime::fnv1a(prog.to_string() + "\n" + codegen::compile_flags() + "\n" + runtime::compiler_command()));
      auto t2 = std::chrono::steady_clock::now();
      bool generated = false;
      auto gen = [&]() { generated = true; source_ = codegen::generate_cpp(prog); return source_; };
      runtime::CompileResult cr = runtime::compile_cached(runtime::cache_dir(cache_dir_), key, gen);
      timings_["codegen_and_compile"] = since(t2);
      timings_["cache_hit"] = cr.cache_hit;
      if (cr.library.empty()) throw std::runtime_error(cr.error);
      if (!generated) source_ = "";  // loaded from the cache: not regenerated
      auto g = std::make_shared<runtime::CompiledGraph>(std::move(tr), std::move(prog));
      std::string err;
      if (!g->load(cr.library, &err)) throw std::runtime_error(err);
      graph_ = g;
      state_ = kReady;
      status_ = "compiled";
    } catch (const std::exception& e) {
      state_ = kEager;
      status_ = std::string("eager: ") + e.what();
    }
    timings_["total"] = since(t0);
    if (!on_compiled_.is_none()) on_compiled_(this);
    return pack(results);
  }

  py::object eager_;
  std::string cache_dir_;
  py::object on_compiled_;
  bool fuse_ = true;
  State state_ = kNew;
  std::string status_ = "not compiled yet";
  std::string trace_text_, source_;
  py::dict timings_;
  std::shared_ptr<runtime::CompiledGraph> graph_;
  bool single_ = false, as_list_ = false;
};

void bind_codegen(py::module_& m) {
  py::class_<CodegenGraph>(m, "CodegenGraph")
      .def(py::init<py::object, std::string, py::object, bool>(), py::arg("eager"), py::arg("cache_dir") = "",
           py::arg("on_compiled") = py::none(), py::arg("fuse") = true)
      .def("__call__", &CodegenGraph::call)
      .def_property_readonly("status", &CodegenGraph::status)
      .def_property_readonly("compiled", &CodegenGraph::compiled)
      .def_property_readonly("graph_text", &CodegenGraph::graph_text)
      .def_property_readonly("program_text", &CodegenGraph::program_text)
      .def_property_readonly("source", &CodegenGraph::source)
      .def_property_readonly("timings", &CodegenGraph::timings)
      .def_property_readonly("num_kernels", &CodegenGraph::num_kernels)
      .def_property_readonly("num_externs", &CodegenGraph::num_externs);
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
