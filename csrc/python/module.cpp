// kiln._C: the Python bindings. Exposes the compiled-function type, the eager graph runner,
// options, statistics and test hooks (bytecode decoding, graph printing).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "autograd/ddp_buckets.h"
#include "frontend/bytecode/bytecode.h"
#include "frontend/bytecode/bytecode_assembler.h"
#include "frontend/hook/code_state.h"
#include "frontend/hook/eager_graph.h"
#include "frontend/hook/eval_frame.h"
#include "frontend/hook/frame_dispatch.h"
#include "frontend/hook/options.h"
#include "frontend/hook/stats.h"
#include "frontend/objects/torch_types.h"
#include "runtime/graph_build.h"
#include "runtime/malloc_tuning.h"

namespace py = pybind11;
namespace kiln::python {
void bind_codegen(py::module_& m);
void bind_decompiler(py::module_& m);
}
using namespace kiln::frontend;

static py::dict stats_dict() {
  const Stats& s = stats();
  py::dict d;
  d["graphs"] = s.graphs;
  d["graph_breaks"] = s.graph_breaks;
  d["frames_compiled"] = s.frames_compiled;
  d["recompiles"] = s.recompiles;
  d["guard_failures"] = s.guard_failures;
  d["cache_hits"] = s.cache_hits;
  d["cache_misses"] = s.cache_misses;
  d["eager_runs"] = s.eager_runs;
  d["recompile_limit_hits"] = s.recompile_limit_hits;
  d["skipped_frames"] = s.skipped_frames;
  py::dict cs;
  cs["capture"] = s.capture_s;
  cs["backend"] = s.backend_s;
  d["compile_s"] = cs;
  py::list graphs;
  for (const auto& g : s.graph_records) {
    py::dict r;
    r["function"] = g.function; r["where"] = g.where; r["code"] = g.code; r["guards"] = g.guards;
    r["backend"] = g.backend; r["ops"] = g.ops; r["inputs"] = g.inputs; r["guard_count"] = g.guard_count;
    r["inlined_functions"] = g.inlined;
    r["meta_hits"] = g.meta_hits; r["meta_misses"] = g.meta_misses; r["capture_s"] = g.capture_s; r["backend_s"] = g.backend_s;
    r["started_s"] = g.started_s;
    r["break_reason"] = g.break_reason; r["break_where"] = g.break_where; r["recompile_reason"] = g.recompile_reason;
    graphs.append(r);
  }
  d["graph_records"] = graphs;
  py::list breaks;
  for (const auto& b : s.breaks) {
    py::dict r;
    r["function"] = b.function; r["where"] = b.where; r["reason"] = b.reason; r["stack"] = b.stack;
    breaks.append(r);
  }
  d["breaks"] = breaks;
  d["recompile_reasons"] = s.recompile_reasons;
  d["recompile_stacks"] = s.recompile_stacks;
  return d;
}

PYBIND11_MODULE(_C, m) {
  kiln::python::bind_decompiler(m);
  m.doc() = "kiln's C++ core";
  if (!register_compiled_function_type(m.ptr()) || !register_eager_graph_type(m.ptr())) throw py::error_already_set();
  g_unsupported_error = PyErr_NewExceptionWithDoc("kiln.Unsupported", "kiln could not capture a frame (raised with fullgraph=True)",
                                                  PyExc_RuntimeError, nullptr);
  m.add_object("Unsupported", py::handle(g_unsupported_error));
  g_graph_declined = PyErr_NewExceptionWithDoc("kiln._C.GraphDeclined", "a compiled graph declined a call, inputs untouched (internal)",
                                               PyExc_Exception, nullptr);
  m.add_object("GraphDeclined", py::handle(g_graph_declined));
  m.def("_init", [] {
    if (!init_torch_objects() || !init_code_state()) throw py::error_already_set();
  });
  m.def("set_skip_rules", [](py::list rules) { set_skip_rules(rules.ptr()); });
  m.def("set_options", [](unsigned log_mask, bool memoize_meta, int max_inline_depth) {
    options().log_mask = log_mask;
    options().memoize_meta = memoize_meta;
    options().max_inline_depth = max_inline_depth;
  });
  m.def("set_cuda_compile_settings", &kiln::runtime::set_cuda_compile_settings,
        "kernel source bytes per NVRTC unit, and whether units compile in child processes (runtime/graph_build.h)");
  m.def("set_log_callback", [](py::object fn) { set_log_callback(fn.ptr()); });
  m.def("set_fx_compiler", [](py::object fn) { set_fx_compiler(fn.ptr()); });
  m.def("set_debug_sink", [](py::object fn) { set_debug_sink(fn.ptr()); });
  m.def("stats", &stats_dict);
  m.def("tune_cpu_malloc", &kiln::runtime::tune_cpu_malloc,
        "glibc's mmap and trim thresholds at the values its own adjustment stops at (runtime/malloc_tuning.h); once per process");
  m.def("_now", &steady_seconds, "seconds on the clock of the graph records' started_s");
  m.def("_graph_record_count", [] { return stats().graph_records.size(); });
  m.def("_fast_meta", [](py::object target, std::string method, py::tuple args, py::dict kwargs) -> py::object {
    PyObject* r = probe_fast_meta(target.ptr(), method, args.ptr(), kwargs.ptr());
    if (!r) return py::none();
    return py::reinterpret_steal<py::object>(r);
  }, "For tests: the C++ shape propagation of an elementwise operator on meta tensors, or None where it takes the Python path.");
  m.def("reset", [] { clear_all_code_states(); reset_stats(); });
  m.def("hook_installed", [] { return kiln_hook_installed() != 0; });
  m.def("decode_bytecode", [](py::bytes code, int major, int minor) {
    std::string s = code;
    Bytecode bc(reinterpret_cast<const uint8_t*>(s.data()), s.size(), major, minor);
    return bc.to_string();
  });
  m.def("_assemble_roundtrip", [](py::bytes code, py::bytes exception_table) {
    std::string c = code, e = exception_table;
    Bytecode bc(reinterpret_cast<const uint8_t*>(c.data()), c.size(), PY_MAJOR_VERSION, PY_MINOR_VERSION);
    auto again = assemble(disassemble(bc), PY_MAJOR_VERSION, PY_MINOR_VERSION);
    auto table = encode_exception_table(parse_exception_table(reinterpret_cast<const uint8_t*>(e.data()), e.size()));
    return py::make_tuple(py::bytes(reinterpret_cast<const char*>(again.data()), again.size()),
                          py::bytes(reinterpret_cast<const char*>(table.data()), table.size()));
  }, "Decode and re-assemble co_code, parse and re-encode co_exceptiontable (tests).");
  m.def("_ddp_bucket_pieces", &kiln::autograd::ddp_bucket_pieces, py::arg("reads"), py::arg("param_bytes"), py::arg("bucket_bytes_cap"),
        "Per graph node, the piece of a DDP split it belongs to (autograd/ddp_buckets.h).");
  m.def("_symbolic_sizes", [](std::vector<int64_t> hints) {
    // Fresh symbols s0, s1... with these hints, as torch.SymInts, and a function returning the
    // shape guards recorded on them so far (tests of the symbolic-size bridge).
    auto env = std::make_shared<kiln::sym::ShapeEnv>();
    py::list out;
    for (size_t i = 0; i < hints.size(); ++i) {
      int s = env->new_symbol("s" + std::to_string(i), -1, -1, hints[i]);
      out.append(py::reinterpret_steal<py::object>(probe_make_symint(env, kiln::sym::Expr::symbol(s))));
    }
    py::cpp_function guards([env] {
      py::list g;
      for (const auto& e : env->guards()) g.append(e.str());
      return g;
    });
    return py::make_tuple(out, guards);
  }, "Symbolic sizes with the given hints and a function listing their shape guards (tests).");
  kiln::python::bind_codegen(m);
  m.attr("LOG_GRAPH_BREAKS") = static_cast<unsigned>(kLogGraphBreaks);
  m.attr("LOG_RECOMPILES") = static_cast<unsigned>(kLogRecompiles);
  m.attr("LOG_GUARDS") = static_cast<unsigned>(kLogGuards);
  m.attr("LOG_GRAPH_CODE") = static_cast<unsigned>(kLogGraphCode);
  m.attr("LOG_PERF") = static_cast<unsigned>(kLogPerf);
  m.attr("LOG_DYNAMIC") = static_cast<unsigned>(kLogDynamic);
}
